"""The local default: SQLite must take the web server and the worker writing at the same moment."""

import json
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


# The queries that ask the database for sums and rows on the scheduler's and the operator's paths,
# run on SQLite; the same figures are expected of PostgreSQL by tests/pool/.
PORTABLE = """
import json, os, django
os.environ["DJANGO_SETTINGS_MODULE"] = "e31site.settings"
django.setup()
from datetime import UTC, datetime, timedelta
from jobs.scheduling import dispatch
dispatch.send = lambda *args, **kwargs: None
from jobs.lifecycle.actions import hold, schedule_pass
from jobs.models import Job
from pool.nodes import Capacity, register
from pool.placement.types import Placement
from pool.scheduler import running_holds
from pool.utilisation import held_core_seconds
from tests.factories import TeamFactory, member_of, run_to_release, submit_job
DAY = datetime(2026, 3, 2, tzinfo=UTC)
team = TeamFactory(slug="red")
alice = member_of(team, "alice")
n1 = register("n1", Capacity(cpu_ids=[0, 1, 2, 3], memory_mb=4096, gpu_ids=[]), now=DAY - timedelta(days=1))
done = submit_job(alice, team, cpus=2, time_limit_s=4 * 3600)
hold([Placement(done.pk, 1, n1, [2, 3], [], done.memory_mb)], now=DAY - timedelta(hours=1))
done.refresh_from_db()
run_to_release(done, now=DAY + timedelta(hours=2, minutes=30, microseconds=500_000))
running = submit_job(alice, team, cpus=1, time_limit_s=600)
hold([Placement(running.pk, 1, n1, [0], [], running.memory_mb)], now=DAY + timedelta(hours=3, minutes=15))
waiting = [submit_job(alice, team, cpus=4) for _ in range(2)]
now = DAY + timedelta(hours=3, minutes=30)
schedule_pass(now=now)
held = held_core_seconds(since=DAY, count=4, step="hour", now=now)
print(json.dumps({
    "held": sorted([node, i, seconds] for (node, i), seconds in held.items()),
    "running": [[list(r.cpu_ids), r.ends_at.isoformat()] for r in running_holds([n1])],
    "positions": [Job.objects.get(pk=job.pk).queue_position for job in waiting],
}))
"""


def test_the_pools_sums_and_the_queue_come_out_the_same_on_sqlite(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env["E31_VAR_DIR"] = str(tmp_path)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    done = subprocess.run([sys.executable, "-c", PORTABLE], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]

    found = json.loads(done.stdout.splitlines()[-1])

    # 2 cores from an hour before the first bucket to 02:30:00.5; 1 core from 03:15 up to now, 03:30.
    assert found["held"] == [["n1", 0, 7200.0], ["n1", 1, 7200.0], ["n1", 2, 3601.0], ["n1", 3, 900.0]]
    assert found["running"] == [[[0], "2026-03-02T03:25:00+00:00"]]  # held at 03:15, a 10-minute limit
    assert found["positions"] == [1, 2]
