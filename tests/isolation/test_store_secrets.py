"""What a probe must not learn of the store (jobs.storage.store.store_secrets)."""

from jobs.storage.store import store_secrets
from tests.s3 import ACCESS_KEY, SECRET_KEY


def test_a_probe_must_not_learn_the_object_stores_keys_or_endpoint(s3_store):
    assert store_secrets() == [ACCESS_KEY, SECRET_KEY, s3_store.endpoint]


def test_a_probe_must_not_learn_the_file_stores_folder(settings, tmp_path):
    assert store_secrets() == [str(tmp_path / "store")]
