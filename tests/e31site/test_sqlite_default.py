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
