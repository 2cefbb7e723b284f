"""Through the real stack: a job queued as standard before its team was required to run strong runs
under gVisor (runsc), and says so."""

import pytest
from django.utils import timezone

from jobs.lifecycle.actions import cancel
from jobs.models import Isolation, Job, Outcome, Stage
from tests.conftest import wait_for_release
from tests.workers import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.celery]


def submitted(api, **fields) -> Job:
    declared = {"image": "busybox", "memory_mb": "64", "time_limit_s": "120", **fields}
    response = api.post("/api/v1/jobs/", declared, format="multipart")
    assert response.status_code == 201, response.content
    return Job.objects.get(pk=response.json()["id"])


def test_a_job_queued_as_standard_runs_under_runsc_once_its_team_requires_strong_isolation(
    stack, api, team, stack_node
):
    # Every core of the node taken, so the next job waits in the queue.
    blocker = submitted(api, name="blocker", cpus=str(stack_node.cpus), command="sleep 300")
    wait_until(lambda: Job.objects.get(pk=blocker.pk).stage == Stage.RUN, 60, message="the blocker to run")
    queued = submitted(api, name="queued", cpus="1", command="dmesg")
    assert (queued.stage, queued.isolation) == (Stage.SUBMIT, Isolation.STANDARD)

    team.requires_strong_isolation = True
    team.save(update_fields=["requires_strong_isolation"])
    cancel(blocker, now=timezone.now())

    job = wait_for_release(queued)
    assert job.outcome == Outcome.SUCCEEDED, job.reason
    assert job.isolation == Isolation.STRONG
    body = api.get(f"/api/v1/jobs/{job.pk}/").json()
    assert body["isolation"] == "strong" and body["hold"]["runtime"] == "runsc"
    log = api.get(f"/api/v1/jobs/{job.pk}/logs/").content
    assert b"Starting gVisor" in log, "its kernel was gVisor's (under runc, dmesg is refused)"
