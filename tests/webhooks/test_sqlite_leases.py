"""`make run`'s SQLite keeps the receivers' leases as PostgreSQL does: their ends are written and compared in
SQL on the database's clock (SQLite's own date arithmetic), so two aliases of one receiver get one attempt at
a time there too, a pass whose clock runs ahead takes over no live lease, and one whose pass died is taken over
once it ends."""

import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]

LEASES = """
import json, os, django
os.environ["DJANGO_SETTINGS_MODULE"] = "e31site.settings"
django.setup()
from datetime import timedelta
from django.db import connection
from django.db.models.functions import Now
from django.utils import timezone
from jobs.scheduling import dispatch
dispatch.send = lambda *args, **kwargs: None
from tests.factories import TeamFactory, member_of
from webhooks.actions import create_webhook
from webhooks.delivery import RECEIVER_LEASE, Attempt, _claim, _record, enqueue
from webhooks.models import Delivery, ReceiverLease
seen = {"vendor": connection.vendor}
for slug, host in [("red", "127.0.0.1"), ("blue", "2130706433")]:
    team = TeamFactory(slug=slug)
    url = f"http://{host}:19001/{slug}"
    create_webhook(team, url=url, events=["job.released"], user=member_of(team, slug), now=timezone.now())
    enqueue(team.pk, "job.released", {}, now=timezone.now() - timedelta(minutes=2))
behind = timezone.now() - timedelta(minutes=1)
first = _claim(behind)
seen["first"] = first.receiver
seen["lasts"] = ReceiverLease.objects.filter(until__gt=Now() + RECEIVER_LEASE - timedelta(seconds=2)).exists()
seen["ahead"] = _claim(timezone.now() + timedelta(minutes=1)) is not None
ReceiverLease.objects.update(until=Now())
second = _claim(timezone.now())
seen["taken_over"] = second is not None and ReceiverLease.objects.get().holder == second.holder
_record(second, Attempt("2xx", 200, 1), now=timezone.now())
seen["leases_after"] = ReceiverLease.objects.count()
seen["attempts"] = sorted(Delivery.objects.values_list("attempts", flat=True))
print(json.dumps(seen))
"""


def test_receivers_leases_run_on_sqlites_clock(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    # This run's own Redis database (the rate limits' cache), never the shared default.
    env |= {"E31_VAR_DIR": str(tmp_path), "CELERY_BROKER_URL": settings.CELERY_BROKER_URL}
    env |= {"E31_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1:19001"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    done = subprocess.run([sys.executable, "-c", LEASES], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]

    seen = json.loads(done.stdout.splitlines()[-1])

    assert seen == {
        "vendor": "sqlite",
        "first": "127.0.0.1:19001",
        "lasts": True,  # RECEIVER_LEASE from when it was taken, not from the pass's moment a minute behind
        "ahead": False,  # blue's alias of the same receiver, by a pass a minute ahead: given back
        "taken_over": True,
        "leases_after": 0,
        "attempts": [1, 1],  # red's, held by a pass that died, and blue's, sent; blue's give-back cost none
    }
