"""Queues through the real stack (HTTP, PostgreSQL, a Celery worker process, real containers): a higher
queue's job is held first when compute frees up, whatever was submitted before it; a team at its queue's
per-team cap waits, its reason naming the queue, while another team's job in that queue runs."""

import pytest

from jobs.models import Job, Stage
from pool.models import Node, Queue
from tests.conftest import STACK_NODE, wait_until

pytestmark = [pytest.mark.docker, pytest.mark.celery]

JOBS = "/api/v1/jobs/"


def submitted(api, name: str, *, cpus: int, command: str = "sleep 300", **fields: str) -> Job:
    body = {"name": name, "image": "busybox", "command": command, "cpus": str(cpus), "memory_mb": "32",
            "time_limit_s": "600", **fields}  # fmt: skip
    response = api.post(JOBS, body, format="multipart")
    assert response.status_code == 201, response.content
    return Job.objects.get(pk=response.json()["id"])


def wait_for_stage(job: Job, stages: set[str], timeout: float = 60) -> Job:
    def reached() -> bool:
        job.refresh_from_db()
        return job.stage in stages

    wait_until(reached, timeout, 0.1, message=f"job {job.name} to reach {stages} (stage {job.stage})")
    return job


@pytest.fixture
def queues(stack):
    """The demo's queues (the stack's database is flushed after each test, the migration's default with it);
    urgent names no teams here, so it is served first but preempts nobody (Queue.preempts): these tests
    are of the order of the queue, not of preemption (test_preemption_stack.py)."""
    batch, _ = Queue.objects.update_or_create(name="batch", defaults={"priority": 50, "is_default": True})
    urgent = Queue.objects.create(name="urgent", priority=100, preempts_lower=True)
    return batch, urgent


def test_an_urgent_job_submitted_after_batch_jobs_is_held_first_when_the_node_frees(api, queues):
    cores = Node.objects.get(name=STACK_NODE).cpus  # every job below asks the whole node: one runs at a time
    blocker = submitted(api, "blocker", cpus=cores)
    wait_for_stage(blocker, {Stage.RUN})
    batch = [submitted(api, f"batch {n}", cpus=cores, command="true") for n in range(3)]
    urgent = submitted(api, "hotfix", cpus=cores, command="true", queue="urgent")
    assert api.get(f"{JOBS}{urgent.pk}/").json()["queue"] == "urgent"

    assert api.post(f"{JOBS}{blocker.pk}/cancel/").status_code in (200, 202)

    wait_for_stage(urgent, {Stage.RENT, Stage.RUN, Stage.OUTPUT, Stage.RELEASE})
    for job in batch:
        job.refresh_from_db()
        assert job.held_at is None or job.held_at > urgent.held_at, (job.name, job.held_at, urgent.held_at)
    assert {wait_for_stage(job, {Stage.RELEASE}, 120).outcome for job in [urgent, *batch]} == {"succeeded"}


def test_a_team_at_its_queues_cap_waits_naming_the_queue_while_another_teams_job_runs(api, outsider_api, queues):
    batch, _urgent = queues
    batch.max_running_cores_per_team = 1
    batch.save(update_fields=["max_running_cores_per_team"])
    first = submitted(api, "red first", cpus=1)
    wait_for_stage(first, {Stage.RUN})

    capped = submitted(api, "red second", cpus=1)
    blue = submitted(outsider_api, "blue", cpus=1)

    wait_for_stage(blue, {Stage.RUN})

    def said_why() -> bool:
        capped.refresh_from_db()
        return "in queue batch" in capped.wait_reason

    wait_until(said_why, 30, 0.1, message=f"the capped job's reason to name its queue ({capped.wait_reason!r})")
    assert capped.stage == Stage.SUBMIT
    assert capped.wait_reason.startswith("its team holds 1 core in queue batch, its limit is 1"), capped.wait_reason
    standing = api.get(f"{JOBS}{capped.pk}/").json()["standing"]
    assert "in queue batch" in standing["reason"]
