"""The local default: SQLite must take the web server and the worker writing at the same moment."""

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

WRITER = """
import os, sys, django
os.environ["DJANGO_SETTINGS_MODULE"] = "e31site.settings"
django.setup()
from django.db import transaction
from django.utils import timezone
from pool.models import Node
from pool.nodes import heartbeat
name = sys.argv[1]
for i in range(150):
    with transaction.atomic():  # read then write, as a scheduler pass or a heartbeat does
        Node.objects.filter(name__startswith="w").count()
        Node.objects.update_or_create(name=f"{name}-{i % 5}", defaults={
            "cpu_ids": [0], "memory_mb": 64, "registered_at": timezone.now(), "last_heartbeat": timezone.now()})
        heartbeat(f"{name}-{i % 5}", now=timezone.now())
print("ok", name)
"""


def test_two_processes_write_the_sqlite_default_at_once_without_locking_errors(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env["E31_VAR_DIR"] = str(tmp_path)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, name],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for name in ("web", "worker", "beat")
    ]
    results = [w.communicate(timeout=120) for w in writers]

    for writer, (out, err) in zip(writers, results, strict=True):
        assert writer.returncode == 0, err[-2000:]
        assert out.startswith("ok"), out
    with closing(sqlite3.connect(tmp_path / "e31.sqlite3")) as db:
        assert db.execute("pragma journal_mode").fetchone()[0] == "wal"


# While its connection is open (SQLite removes -wal and -shm when the last one closes), the modes of
# everything the local default keeps in E31_VAR_DIR.
MODES = """
import os, stat, sys, django
os.environ["DJANGO_SETTINGS_MODULE"] = "e31site.settings"
django.setup()
from django.conf import settings
from django.db import connection
from teams.people import create_team
create_team("red")  # a write: the -wal and -shm files exist from here on
var = settings.VAR_DIR
for path in [var, *sorted(var.rglob("*"))]:
    print(path.relative_to(var), oct(stat.S_IMODE(path.stat().st_mode)))
"""


def modes_after_start(var: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env["E31_VAR_DIR"] = str(var)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    done = subprocess.run([sys.executable, "-c", MODES], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(line.split() for line in done.stdout.splitlines())


def test_the_local_default_keeps_its_database_and_secrets_private(tmp_path):
    old = os.umask(0o022)  # the usual umask, which leaves new files readable by everyone
    try:
        modes = modes_after_start(tmp_path / "var")
    finally:
        os.umask(old)

    assert modes["."] == "0o700"
    for name in ("e31.sqlite3", "e31.sqlite3-wal", "e31.sqlite3-shm", "secret_key"):
        assert modes[name] == "0o600", (name, modes)


def test_files_an_older_version_left_readable_are_closed_at_start(tmp_path):
    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    var.chmod(0o755)
    for name in ("e31.sqlite3", "e31.sqlite3-wal", "e31.sqlite3-shm"):
        (var / name).touch()
        (var / name).chmod(0o644)

    modes = modes_after_start(var)

    assert modes["."] == "0o700"
    assert modes["e31.sqlite3"] == modes["e31.sqlite3-wal"] == modes["e31.sqlite3-shm"] == "0o600"
