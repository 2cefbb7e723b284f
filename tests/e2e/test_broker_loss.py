"""The broker is lost whole while jobs wait, are held and run (FLUSHALL, or a restart without
persistence): every job still runs and ends, each exactly once. The database decides; the broker only
nudges, and what it forgot is sent again (the node's watchdog, the nudge of the next release).

A Redis server of its own and a node `lose` with two cores and one worker process (so one job runs,
the next is held with its message waiting in the node's queue, and the rest wait in the pool's queue).
Runs are counted three ways: the containers the engine started with the job's run label, the job's
`run` events, and its accounting records: one of each per job.
"""

from datetime import datetime, timedelta

import docker
import pytest
from django.conf import settings
from django.utils import timezone

from accounting.models import Record
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, JobEvent, Outcome, Stage
from jobs.storage.store import log_key
from jobs.transitions import Event
from pool.models import Node
from tests.conftest import wait_for_release, wait_until
from tests.factories import submit_job
from tests.redis_server import only_node_on, private_broker
from worker.sandbox import run_key
from worker.sandbox.docker import NAMESPACE_LABEL, RUN_LABEL

pytestmark = [pytest.mark.docker, pytest.mark.celery]

NODE = "lose"


@pytest.fixture
def broker():
    with private_broker(f"{settings.E31_SANDBOX_NAMESPACE}-{NODE}") as server:
        yield server


@pytest.fixture
def node(broker, transactional_db, images, monkeypatch):
    with only_node_on(broker, NODE, monkeypatch, E31_NODE_CPUS="0,1", E31_WORKER_CONCURRENCY="1") as worker:
        yield worker


def stage_of(job: Job) -> str:
    job.refresh_from_db()
    return job.stage


def worker_log(job: Job) -> bytes:
    """The job's sealed log, in the store of the node's worker (this test's own store is elsewhere)."""
    return (settings.VAR_DIR / "store" / log_key(job.pk)).read_bytes()


def container_starts(job: Job, since: datetime, until: datetime) -> int:
    """Containers the engine started for the job's run, by its labels (the engine's times are whole seconds)."""
    client = docker.from_env()
    try:
        labels = [f"{NAMESPACE_LABEL}={settings.E31_SANDBOX_NAMESPACE}", f"{RUN_LABEL}={run_key(job.pk, job.attempt)}"]
        events = client.events(
            since=since, until=until, decode=True,
            filters={"type": "container", "event": "start", "label": labels},
        )  # fmt: skip
        return sum(1 for _ in events)
    finally:
        client.close()


@pytest.mark.parametrize("lose", ["flushall", "restart"])
def test_every_job_runs_once_after_the_broker_lost_everything(lose, broker, node, member, team):
    since = timezone.now()
    first = submit_job(member, team, image="busybox", command="sleep 15; echo ran first", name="running")
    wait_until(lambda: stage_of(first) == Stage.RUN, 60, 0.1, message="the first job to run")
    held = submit_job(member, team, image="busybox", command="echo ran held", name="held")
    waiting = [
        submit_job(member, team, image="busybox", command=f"echo ran waiting-{i}", cpus=2, name=f"waiting {i}")
        for i in range(2)
    ]
    # The node's one process runs the first job (for 15 s, long enough on a busy machine for what follows).
    schedule_pass()
    assert [stage_of(job) for job in (first, held, *waiting)] == [Stage.RUN, Stage.RENT, Stage.SUBMIT, Stage.SUBMIT]
    # (The node's watchdog may have sent it again meanwhile: a second message does nothing.)
    assert broker.client().llen(f"node.{NODE}") >= 1, "the held job's run waits in the node's queue"

    if lose == "flushall":
        broker.flushall()
    else:
        broker.kill()
        broker.start()
    assert not broker.client().keys("*"), "the broker holds nothing"

    jobs = [wait_for_release(job, 120) for job in (first, held, *waiting)]
    until = timezone.now() + timedelta(seconds=2)
    for job in jobs:
        assert (job.outcome, job.exit_code, job.attempt) == (Outcome.SUCCEEDED, 0, 1), (job.name, job.reason)
        assert Record.objects.filter(job=job).count() == 1, job.name
        assert JobEvent.objects.filter(job=job, event=Event.START).count() == 1, job.name
        assert container_starts(job, since, until) == 1, job.name
        assert worker_log(job).count(b"ran ") == 1, job.name  # the marker it echoed, once
    assert node.alive()
    assert Node.objects.get(name=NODE).state == Node.State.ACTIVE
