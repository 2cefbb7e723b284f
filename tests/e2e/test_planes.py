"""Two planes on the real stack: one team's webhooks hold every thread of the webhooks worker (a receiver on
loopback that accepts and never answers, forty deliveries waiting for it, more passes queued behind), and still
another team's trivial job is held, run and released while those passes go on, and the scheduler pass, mail,
schedules and upkeep each run on their own workers meanwhile."""

import pytest
import redis
from django.db import transaction
from django.utils import timezone

from e31site.celery import app
from jobs import dispatch
from jobs.models import Job, Outcome
from tests.conftest import wait_for_release, wait_until
from tests.webhooks.http_receiver import Receiver
from tests.workers import PlatformWorker
from webhooks.delivery import TASK as WEBHOOKS_TASK
from webhooks.delivery import enqueue

pytestmark = [pytest.mark.docker, pytest.mark.celery]

DELIVERIES = 40  # each held 5 s by the silent receiver (webhooks.delivery.TIMEOUT_S): a pass lasts its 50 s
QUEUED = 5  # passes beat would have queued meanwhile
# The other kinds' passes, each sent once while the webhooks worker is held (the scheduler's is the job's hold).
OTHERS = {"mail": "notify.send", "schedules": "schedules.due", "upkeep": "jobs.retention", "scheduler": "jobs.windows"}


@pytest.fixture
def silent_receiver():
    receiver = Receiver(delay_s=3600).start()  # reads each request and never answers
    yield receiver
    receiver.stop()  # the requests held there end at once


def active(worker: PlatformWorker) -> list[dict]:
    answer = app.control.inspect(destination=[worker.hostname], timeout=5).active() or {}
    return answer.get(worker.hostname, [])


def passes_done(worker: PlatformWorker, task: str, offset: int) -> int:
    return sum(1 for line in worker.log_since(offset).splitlines() if f"Task {task}[" in line and "succeeded" in line)


def test_a_webhooks_worker_held_by_a_silent_receiver_delays_no_run_and_no_other_kind_of_platform_work(
    stack, platform_plane, team, api, outsider_api, settings, silent_receiver
):
    settings.E31_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]  # the workers' too (tests/conftest.py, worker_env)
    made = api.post("/api/v1/webhooks/", {"url": silent_receiver.url, "events": ["job.released"]}, format="json")
    assert made.status_code == 201, made.content
    for n in range(DELIVERIES):  # as many releases of the team's jobs, each committed and asking for a pass
        with transaction.atomic():
            enqueue(team.pk, "job.released", {"id": f"job {n}"}, now=timezone.now())
    for _ in range(QUEUED):
        dispatch.send(WEBHOOKS_TASK)
    webhooks = platform_plane["webhooks"]
    queue = settings.E31_PLATFORM_QUEUES["webhooks"]
    wait_until(lambda: len(active(webhooks)) == webhooks.concurrency, 30, message="every webhooks thread in a pass")
    held = {task["id"] for task in active(webhooks)}
    assert redis.Redis.from_url(settings.CELERY_BROKER_URL).llen(queue) >= 1, "passes wait behind them"
    offsets = {kind: platform_plane[kind].log_path.stat().st_size for kind in OTHERS}

    submitted = timezone.now()
    response = outsider_api.post(
        "/api/v1/jobs/",
        {"name": "trivial", "image": "busybox", "command": "true", "cpus": "1", "memory_mb": "64",
         "time_limit_s": "60"},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    job = wait_for_release(Job.objects.get(pk=response.json()["id"]), 40)
    assert job.outcome == Outcome.SUCCEEDED, job.reason
    for task in OTHERS.values():
        dispatch.send(task)
    for kind, task in OTHERS.items():
        wait_until(lambda: passes_done(platform_plane[kind], task, offsets[kind]) >= 1, 30,  # noqa: B023
                   message=f"a pass of {task} on the {kind} worker")  # fmt: skip

    # All of it while the same webhooks passes were held, and none of the queued ones could start.
    assert {task["id"] for task in active(webhooks)} == held
    assert redis.Redis.from_url(settings.CELERY_BROKER_URL).llen(queue) >= 1
    assert len(silent_receiver.received) < DELIVERIES
    assert (job.released_at - submitted).total_seconds() < 30
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(queue)  # the queued passes: no other test's
