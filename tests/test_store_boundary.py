"""One store: Django's storage (and django-storages) is reached from jobs/storage/store.py only, so every read and
write of a job's files has the store's ranged reads and its StoreUnavailable (a 503 under a request)."""

import re

from tests.test_docs import PACKAGES, ROOT

STORE = "jobs/storage/store.py"
# The storage by name, Django's storage module, or django-storages imported.
REACHING = re.compile(
    r"\bdefault_storage\b|\bstorages\[|from django\.core\.files\.storage import|^\s*(?:from|import) storages\b", re.M
)


def reaching_the_storage() -> dict[str, list[str]]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = path.relative_to(ROOT).as_posix()
            if name != STORE and (seen := REACHING.findall(path.read_text())):
                found[name] = seen
    return found


def test_only_the_store_module_reaches_the_storage():
    assert reaching_the_storage() == {}


def test_the_check_sees_a_module_that_names_the_storage():
    assert REACHING.findall("from django.core.files.storage import default_storage\nimport storages.backends.s3\n") == [
        "from django.core.files.storage import",
        "default_storage",
        "import storages",
    ]
    assert (ROOT / STORE).is_file() and REACHING.search((ROOT / STORE).read_text())
