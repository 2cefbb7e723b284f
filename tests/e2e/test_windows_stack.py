"""A maintenance window through the real stack: HTTP, PostgreSQL, a Celery worker process, real containers.

The suite's worker runs no beat: the test sends beat's two passes (the windows' and the scheduler's) itself,
as beat would, while it waits.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job, Outcome, Stage
from jobs.scheduling import dispatch
from pool.models import MaintenanceWindow, Node, NodeStateChange
from pool.windows import DRAIN_PREFIX
from tests.conftest import STACK_NODE, wait_for_release, wait_until

pytestmark = [pytest.mark.docker, pytest.mark.celery]

STARTS_IN_S = 20  # room for the job that fits before it to be held by the pass its submission asks for
LASTS_S = 5
FITS_S = 5  # the time limit of the job that ends before the window starts


def submit(api, name: str, time_limit_s: int) -> Job:
    response = api.post(
        "/api/v1/jobs/",
        {"name": name, "image": "busybox", "command": f"echo {name}", "cpus": "1", "memory_mb": "64",
         "time_limit_s": str(time_limit_s)},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    return Job.objects.get(pk=response.json()["id"])


def beat() -> None:
    dispatch.send("jobs.windows")
    dispatch.send(dispatch.SCHEDULE_TASK)


def test_a_job_that_would_run_into_a_window_waits_for_it_and_one_that_fits_runs_now(stack, api):
    node = Node.objects.get(name=STACK_NODE)
    now = timezone.now()
    window = MaintenanceWindow.objects.create(
        starts_at=now + timedelta(seconds=STARTS_IN_S), ends_at=now + timedelta(seconds=STARTS_IN_S + LASTS_S),
        reason="swap the disks", created_at=now,
    )  # fmt: skip
    window.nodes.set([node])
    assert api.get("/api/v1/pool/windows/").json()[0]["reason"] == "swap the disks"

    fits = submit(api, "fits", FITS_S)
    into = submit(api, "into", 60)

    fits = wait_for_release(fits, 60)
    assert fits.outcome == Outcome.SUCCEEDED, fits.reason
    assert fits.released_at < window.starts_at
    into.refresh_from_db()
    assert into.stage == Stage.SUBMIT
    assert "maintenance window" in into.wait_reason and "swap the disks" in into.wait_reason
    assert into.expected_start is not None and into.expected_start >= window.ends_at

    def drained() -> bool:
        beat()
        node.refresh_from_db()
        return node.state == Node.State.DRAINING

    wait_until(drained, STARTS_IN_S + 30, 0.5, message="the window to drain its node")
    into.refresh_from_db()
    assert into.stage == Stage.SUBMIT

    def held() -> bool:
        beat()
        into.refresh_from_db()
        return into.stage != Stage.SUBMIT

    wait_until(held, LASTS_S + 60, 0.5, message="the job to be held once the window is over")
    into = wait_for_release(into, 60)
    assert into.outcome == Outcome.SUCCEEDED, into.reason
    assert into.held_at >= window.ends_at

    node.refresh_from_db()
    window.refresh_from_db()
    assert node.state == Node.State.ACTIVE
    assert window.drained_at is not None and window.resumed_at is not None
    changes = NodeStateChange.objects.filter(node=node, at__gte=now).order_by("at", "pk")
    assert [(c.to_state, c.by, c.reason.startswith(DRAIN_PREFIX)) for c in changes] == [
        (Node.State.DRAINING, None, True), (Node.State.ACTIVE, None, False),
    ]  # fmt: skip
