"""`make run`'s SQLite: a due pass commits each schedule on its own, since SQLite's write lock is the whole
database's and a chunk's transaction would keep every other writer (a submission, the scheduler pass) waiting
for all its schedules; PostgreSQL keeps chunks of a few dozen, its row locks letting other writers on."""

import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from schedules import runs

ROOT = Path(__file__).resolve().parents[2]

PASS = """
import json, os, django
os.environ["DJANGO_SETTINGS_MODULE"] = "e31site.settings"
django.setup()
from datetime import UTC, datetime, timedelta
from django.db import connection
from jobs.scheduling import dispatch
dispatch.send = lambda *args, **kwargs: None
from schedules.models import ScheduleRun
from schedules.runs import due_pass
from tests.factories import RuntimeImageFactory, TeamFactory, member_of, schedule_of
team = TeamFactory(slug="red")
user = member_of(team, "alice")
RuntimeImageFactory(name="busybox")
t0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
for n in range(3):
    schedule_of(user, team, name=f"s{n}", cron="* * * * *", now=t0)
begun = []
def counting(execute, sql, params, many, context):
    if sql.startswith("BEGIN"):
        begun.append(sql)
    return execute(sql, params, many, context)
with connection.execute_wrapper(counting):
    recorded = due_pass(now=t0 + timedelta(minutes=1, seconds=1))
statuses = sorted(ScheduleRun.objects.values_list("status", flat=True))
print(json.dumps({"vendor": connection.vendor, "recorded": recorded, "transactions": len(begun), "runs": statuses}))
"""


def test_a_pass_on_sqlite_commits_each_schedule_in_a_transaction_of_its_own(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    # This run's own Redis database (the rate limits' cache), never the shared default.
    env |= {"E31_VAR_DIR": str(tmp_path), "CELERY_BROKER_URL": settings.CELERY_BROKER_URL}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    done = subprocess.run([sys.executable, "-c", PASS], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]

    seen = json.loads(done.stdout.splitlines()[-1])

    assert seen == {"vendor": "sqlite", "recorded": 3, "transactions": 3, "runs": ["submitted"] * 3}


def test_a_pass_on_postgresql_records_a_chunk_per_transaction(db):
    assert runs.chunk_size() == runs.CHUNK > 1
