"""The local default, SQLite, stores any 64-bit integer and raises OverflowError past it: a number past its column
sent to the API there is the same 400 naming the field as on PostgreSQL, never a 500."""

import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]

OVERFLOWING = """
import json, os, django
os.environ["DJANGO_SETTINGS_MODULE"] = "e31site.settings"
django.setup()
from django.utils import timezone
from rest_framework.test import APIClient
from jobs.scheduling import dispatch
dispatch.send = lambda *args, **kwargs: None
from pool.nodes import Capacity, register
from tests.factories import RuntimeImageFactory, TeamFactory, member_of
alice = member_of(TeamFactory(slug="red"), "alice")
RuntimeImageFactory(name="busybox")
register("n1", Capacity(cpu_ids=[0, 1], memory_mb=4096, gpu_ids=[]), now=timezone.now())
api = APIClient(SERVER_NAME="127.0.0.1")
api.raise_request_exception = False  # a 500 is an answer here, as a server's would be
api.force_authenticate(alice)
job = {"name": "n", "image": "busybox", "command": "true", "cpus": 1, "memory_mb": 64, "time_limit_s": 60}
asked = [("/api/v1/arrays/", "max_running", 2**63), ("/api/v1/arrays/", "stop_after_failures", 10**30),
         ("/api/v1/arrays/", "max_running", 2**31), ("/api/v1/jobs/", "max_retries", 2**63)]
answers = []
for url, field, value in asked:
    body = json.dumps({**job, "indices": "0-1", field: value} if "arrays" in url else {**job, field: value})
    answer = api.post(url, body, content_type="application/json")
    answers.append([field, answer.status_code, answer.json() if answer.status_code == 400 else None])
print(json.dumps(answers))
"""


def test_an_overflowing_number_is_a_400_naming_the_field_on_sqlite(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    # This run's own Redis database (the throttles' cache), never the shared default.
    env |= {"E31_VAR_DIR": str(tmp_path), "CELERY_BROKER_URL": settings.CELERY_BROKER_URL}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    done = subprocess.run([sys.executable, "-c", OVERFLOWING], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]

    answers = json.loads(done.stdout.splitlines()[-1])

    int_max = "Ensure this value is less than or equal to 2147483647."
    assert answers == [
        ["max_running", 400, {"max_running": [int_max]}],
        ["stop_after_failures", 400, {"stop_after_failures": [int_max]}],
        ["max_running", 400, {"max_running": [int_max]}],
        ["max_retries", 400, {"max_retries": ["Ensure this value is less than or equal to 5."]}],
    ]
