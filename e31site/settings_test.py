"""Test settings: PostgreSQL, and a Redis database, folders and container namespace per xdist worker."""

import os
from pathlib import Path

_worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
_n = int(_worker[2:]) if _worker[2:].isdigit() else 0
_ident = f"{os.environ.get('E31_TEST_ID', 'main')}{_worker}"
# Per-worker values are set below, not in os.environ, which every xdist worker inherits from the controller.

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/e31")
os.environ.setdefault("E31_NODE_MEMORY_MB", "4096")
os.environ.setdefault("E31_HEARTBEAT_S", "2")
# A run whose message was lost is sent again within a few heartbeats, as the real-stack tests wait.
os.environ.setdefault("E31_RESEND_AFTER_S", "5")

from e31site.settings import *  # noqa: E402,F403

CELERY_BROKER_URL = f"redis://127.0.0.1:6379/{int(os.environ.get('E31_TEST_REDIS_DB', '10')) + _n}"
VAR_DIR = Path(f"/tmp/e31-test/{_ident}")
STORAGES = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(VAR_DIR / "store")},
    },
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
E31_SCRATCH_DIR = VAR_DIR / "scratch"
E31_SANDBOX_NAMESPACE = f"e31test{_ident}"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Throttling counters per test process (tests/conftest.py empties them before each test).
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
