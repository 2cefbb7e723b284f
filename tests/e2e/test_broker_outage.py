"""The broker drops while a job runs: the node's worker survives, reconnects, keeps heartbeating and
runs the next jobs.

The test has a Redis server of its own (killed and restarted on the same port, as a crash and a
restart of the broker would), and a node whose worker process uses it.
"""

import pytest
from django.conf import settings
from django.utils import timezone

from accounting.models import Record
from jobs.models import Job, Outcome, Stage
from pool.models import Node
from tests.conftest import wait_for_release, wait_until
from tests.factories import submit_job
from tests.redis_server import only_node_on, private_broker

pytestmark = [pytest.mark.docker, pytest.mark.celery]

NODE = "brk"


@pytest.fixture
def broker():
    with private_broker(settings.E31_SANDBOX_NAMESPACE) as server:
        yield server


@pytest.fixture
def node_on(broker, transactional_db, images, monkeypatch):
    """The node `brk`, a worker process of its own on the test's broker; the test's messages go there."""
    with only_node_on(broker, NODE, monkeypatch, E31_NODE_CPUS="0") as worker:
        yield worker


def running(job: Job) -> Job:
    def started():
        job.refresh_from_db()
        return job.stage == Stage.RUN

    wait_until(started, 60, 0.1, message=f"job {job.pk} to run")
    return job


def heartbeat_after(moment, what: str) -> None:
    wait_until(lambda: Node.objects.get(name=NODE).last_heartbeat > moment, 20, 0.2, message=what)


def test_the_node_survives_a_broker_restart_mid_job_and_goes_on(broker, node_on, member, team):
    job = running(submit_job(member, team, image="busybox", command="sleep 5; echo done", name="during the outage"))
    assert job.active_hold.node.name == NODE

    broker.kill()
    down_since = timezone.now()
    heartbeat_after(down_since, "a heartbeat while the broker is down")
    broker.start()

    job = wait_for_release(job, 60)
    assert (job.outcome, job.exit_code) == (Outcome.SUCCEEDED, 0), job.reason
    assert Record.objects.filter(job=job).count() == 1
    back_since = timezone.now()
    heartbeat_after(back_since, "a heartbeat after the broker came back")
    assert node_on.alive(), "the worker is still running"

    after = submit_job(member, team, image="busybox", command="echo after", name="after the outage")
    after = wait_for_release(after, 60)
    assert (after.outcome, after.active_hold, after.holds.get().node.name) == (Outcome.SUCCEEDED, None, NODE)
    assert Record.objects.filter(job=after).count() == 1
    heartbeat_after(timezone.now(), "a heartbeat after the next job")
