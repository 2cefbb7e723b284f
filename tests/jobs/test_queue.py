"""The queue as the jobs app keeps it: where a waiting job stands, why, and when it is expected to
start, as the last scheduler pass stored them, shown by the API and the job page."""

from datetime import UTC, datetime, timedelta

import pytest

from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Stage
from jobs.scheduling.queue import standing
from pool.nodes import Capacity, register
from tests.factories import submit_job

T0 = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)


@pytest.fixture
def reserved(member, team):
    """A 2-core job waiting for the one core still held, until 23:00 at the latest."""
    register("n1", Capacity(cpu_ids=[0, 1], memory_mb=4096, gpu_ids=[]), now=T0)
    running = submit_job(member, team, cpus=1, time_limit_s=3600)
    schedule_pass(now=T0)
    running.refresh_from_db()
    assert actions.start_run(running, now=T0)
    job = submit_job(member, team, cpus=2, time_limit_s=600, name="big")
    schedule_pass(now=T0 + timedelta(minutes=5))
    job.refresh_from_db()
    return job


def test_the_pass_stores_when_a_reserved_job_is_expected_to_start(reserved):
    assert reserved.expected_start == T0 + timedelta(hours=1)
    assert standing(reserved) == {
        "position": 1,
        "queued": 1,
        "reason": "reserved: expected to start by 23:00 UTC when n1 frees 1 core",
        "expected_start": T0 + timedelta(hours=1),
    }


def test_the_api_says_when_a_waiting_job_is_expected_to_start(api, reserved):
    body = api.get(f"/api/v1/jobs/{reserved.pk}/").json()

    assert body["standing"] == {
        "position": 1,
        "queued": 1,
        "reason": "reserved: expected to start by 23:00 UTC when n1 frees 1 core",
        "expected_start": "2026-03-02T23:00:00Z",
    }


def test_the_api_document_describes_the_expected_start(api):
    schema = api.get("/api/schema/?format=json").json()

    standing = schema["components"]["schemas"]["Standing"]
    assert standing["properties"]["expected_start"] == {
        "type": "string",
        "format": "date-time",
        "nullable": True,
        "description": "when it is expected to start at the latest: set while the pass reserves compute for it",
    }
    assert schema["components"]["schemas"]["Job"]["properties"]["standing"]["allOf"] == [
        {"$ref": "#/components/schemas/Standing"}
    ]


def test_the_job_page_says_when_a_waiting_job_is_expected_to_start(client, member, reserved):
    client.force_login(member)

    content = client.get(f"/jobs/{reserved.pk}/").content.decode()

    assert (
        'number 1 of 1 in the queue, expected to start by <time id="expected-start" '
        'datetime="2026-03-02T23:00:00+00:00"'
    ) in content
    assert "— reserved: expected to start by 23:00 UTC when n1 frees 1 core." in content


def test_a_job_without_a_reservation_has_no_expected_start(api, member, team):
    register("n1", Capacity(cpu_ids=[0, 1], memory_mb=4096, gpu_ids=[]), now=T0)
    submit_job(member, team, cpus=1)
    job = submit_job(member, team, cpus=1)
    schedule_pass(now=T0, limit=1)  # it fits, but past the pass's limit

    body = api.get(f"/api/v1/jobs/{job.pk}/").json()

    assert body["standing"]["expected_start"] is None
    assert body["standing"]["reason"] == "next to be held"


def test_a_held_job_forgets_its_expected_start(reserved):
    running = Job.objects.get(stage=Stage.RUN)
    actions.finish_run(running, outcome="succeeded", exit_code=0, reason="", now=T0 + timedelta(minutes=30))
    actions.release(running, outcome="succeeded", reason="", now=T0 + timedelta(minutes=30))

    schedule_pass(now=T0 + timedelta(minutes=30))

    reserved.refresh_from_db()
    assert reserved.stage == Stage.RENT
    assert (reserved.queue_position, reserved.wait_reason, reserved.expected_start) == (None, "", None)
