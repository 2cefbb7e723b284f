"""Test settings: PostgreSQL, and one Redis database, store and container namespace per xdist worker."""

import os

_worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
_n = int(_worker[2:]) if _worker[2:].isdigit() else 0
# Several suites may run on one machine at once (E31_TEST_ID tells them apart): each needs its own
# database (DATABASE_URL), Redis database, folders and container namespace.
_ident = f"{os.environ.get('E31_TEST_ID', 'main')}{_worker}"

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/e31")
os.environ.setdefault("CELERY_BROKER_URL", f"redis://127.0.0.1:6379/{10 + _n}")
os.environ.setdefault("E31_VAR_DIR", f"/tmp/e31-test/{_ident}")
os.environ.setdefault("E31_SANDBOX_NAMESPACE", f"e31test{_ident}")
os.environ.setdefault("E31_NODE_MEMORY_MB", "4096")
os.environ.setdefault("E31_HEARTBEAT_S", "2")

from e31site.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES["staticfiles"] = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}  # noqa: F405
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # noqa: F405
