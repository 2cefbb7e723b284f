"""A job's history through the real stack: HTTP, PostgreSQL, a Celery worker process, a container."""

import pytest

from jobs.models import Job
from tests.conftest import STACK_NODE, wait_for_release

pytestmark = [pytest.mark.docker, pytest.mark.celery]


def test_a_job_run_to_the_end_has_one_event_per_step_naming_who_acted(stack, api):
    response = api.post(
        "/api/v1/jobs/",
        {"name": "history", "image": "busybox", "command": "sh -c 'echo hi > /output/hi.txt'", "cpus": "1",
         "memory_mb": "64", "time_limit_s": "60"},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    job = wait_for_release(Job.objects.get(pk=response.json()["id"]))
    assert job.outcome == "succeeded", job.reason

    events = api.get(f"/api/v1/jobs/{job.pk}/events/").json()

    node = f"node {STACK_NODE}"
    assert [(e["stage"], e["outcome"], e["attempt"], e["actor"]) for e in events] == [
        ("submit", "", 1, "alice"),
        ("rent", "", 1, "scheduler"),
        ("run", "", 1, node),
        ("output", "succeeded", 1, node),
        ("release", "succeeded", 1, node),
    ]
    body = api.get(f"/api/v1/jobs/{job.pk}/").json()
    stamps = ["submitted_at", "held_at", "started_at", "finished_at", "released_at"]
    assert [e["at"] for e in events] == [body[name] for name in stamps]
    assert events[1]["reason"] == f"on node {STACK_NODE}" and events[2]["reason"].startswith("run by ")
