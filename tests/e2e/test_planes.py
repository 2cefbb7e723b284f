"""Two planes on the real stack: one team's webhooks hold every thread of the webhooks worker (receivers on
loopback that accept and never answer, one a webhook, so each attempt takes its whole deadline), and still
another team's trivial job is held, run and released while those passes go on, and the scheduler pass, mail,
schedules and upkeep each run on their own workers meanwhile."""

import re
import time

import pytest
from django.db import transaction
from django.utils import timezone

from e31site.celery import app
from jobs.models import Job, Outcome
from jobs.scheduling import dispatch
from tests.conftest import wait_for_release, wait_until
from tests.webhooks.http_receiver import ALLOWED, Receiver
from tests.workers import PlatformWorker
from webhooks.actions import create_webhook
from webhooks.delivery import TASK as WEBHOOKS_TASK
from webhooks.delivery import enqueue

pytestmark = [pytest.mark.docker, pytest.mark.celery]

# Silent receivers, each one webhook's: a delivery takes a receiver's lease for its whole 5 s deadline, and a
# pass has E31_WEBHOOK_IN_FLIGHT (8) under way, so the webhooks worker's passes take several rounds of it.
RECEIVERS = 48
QUEUED = 5  # passes beat would have queued meanwhile
# The other kinds' passes, each sent once while the webhooks worker is held (the scheduler's is the job's hold).
OTHERS = {
    "mail": "notify.send", "schedules": "schedules.due", "upkeep": "jobs.retention", "scheduler": "jobs.windows",
    "isolation": "isolation.judge",
}  # fmt: skip
# The bound for another team's trivial job (0.55-0.63 s alone), as tests/e2e/test_schedules_stack.py has it.
RELEASED_WITHIN_S = 3


@pytest.fixture
def silent_receivers():
    receivers = [Receiver(silent_paths=("/",)).start() for _ in range(RECEIVERS)]  # each reads, never answers
    yield receivers
    for receiver in receivers:
        receiver.stop()  # the requests held there end at once


def active(worker: PlatformWorker) -> list[dict]:
    answer = app.control.inspect(destination=[worker.hostname], timeout=5).active() or {}
    return answer.get(worker.hostname, [])


def passes_done(worker: PlatformWorker, task: str, offset: int) -> int:
    return sum(1 for line in worker.log_since(offset).splitlines() if f"Task {task}[" in line and "succeeded" in line)


def ended_at(worker: PlatformWorker, task: dict) -> float | None:
    """When a task the worker ran ended (its start plus the time its log line gives), None while it runs."""
    found = re.search(rf"\[{task['id']}\] succeeded in ([0-9.]+)s", worker.log_since())
    return task["time_start"] + float(found[1]) if found else None


def test_a_webhooks_worker_held_by_silent_receivers_delays_no_run_and_no_other_kind_of_platform_work(
    stack, platform_plane, team, member, outsider_api, settings, silent_receivers
):
    settings.E31_WEBHOOK_ALLOWED_HOSTS = [ALLOWED]  # the workers' too (tests/conftest.py, worker_env)
    for receiver in silent_receivers:
        create_webhook(team, url=receiver.url, events=["job.released"], user=member, now=timezone.now())
    with transaction.atomic():  # a release of the team's job: a delivery to every receiver, and a pass asked for
        enqueue(team.pk, "job.released", {"id": "a job"}, now=timezone.now())
    for _ in range(QUEUED):
        dispatch.send(WEBHOOKS_TASK)
    webhooks = platform_plane["webhooks"]
    wait_until(lambda: len(active(webhooks)) == webhooks.concurrency, 30, message="every webhooks thread in a pass")
    held = active(webhooks)
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
    all_done = time.time()

    # All of it while the webhooks passes seen busy were still sending to the silent receivers.
    wait_until(lambda: all(ended_at(webhooks, task) for task in held), 120, message="the held webhooks passes to end")
    assert all(ended_at(webhooks, task) > all_done for task in held)  # type: ignore[operator]
    assert (job.released_at - submitted).total_seconds() < RELEASED_WITHIN_S
    assert max(r.most_open for r in silent_receivers) == 1, "one delivery at a time per receiver"
