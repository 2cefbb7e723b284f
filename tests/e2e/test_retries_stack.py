"""Retry rules through the real stack: HTTP, PostgreSQL, a Celery worker process, real containers."""

from datetime import timedelta

import pytest

from accounting.models import Record
from jobs.models import Job, Outcome
from jobs.scheduling import dispatch
from pool.models import Hold
from tests.conftest import wait_for_release, wait_until

pytestmark = [pytest.mark.docker, pytest.mark.celery]

# Python's own few MB on top: over 100 MB, well under twice that.
ALLOCATE_MB = 150
DELAY_S = 2


def test_an_out_of_memory_job_succeeds_on_its_second_attempt_with_twice_the_memory(stack, api):
    response = api.post(
        "/api/v1/jobs/",
        {
            "name": "hungry", "image": "python", "cpus": "1", "memory_mb": "100", "time_limit_s": "60",
            "command": f"python3 -c \"x = b'x' * ({ALLOCATE_MB} << 20); print('allocated', len(x) >> 20)\"",
            "max_retries": "1", "retry_on": "out_of_memory", "retry_memory_factor": "2",
        },
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    job = wait_for_release(Job.objects.get(pk=response.json()["id"]), 120)

    assert (job.outcome, job.exit_code, job.attempt, job.memory_mb) == (Outcome.SUCCEEDED, 0, 2, 200), job.reason
    holds = list(Hold.objects.filter(job=job).order_by("held_at"))
    records = list(Record.objects.filter(job=job).order_by("sequence"))
    assert [(h.attempt, h.memory_mb) for h in holds] == [(1, 100), (2, 200)]
    assert [(r.hold_id, r.outcome, r.memory_mb) for r in records] == [
        (holds[0].pk, Outcome.OUT_OF_MEMORY, 100),
        (holds[1].pk, Outcome.SUCCEEDED, 200),
    ]

    body = api.get(f"/api/v1/jobs/{job.pk}/").json()
    first, second = body["attempts"]
    assert (first["attempt"], first["outcome"], first["memory_mb"]) == (1, Outcome.OUT_OF_MEMORY, 100)
    assert "memory limit of 100 MB" in first["reason"]
    assert first["held_at"] and first["released_at"] and first["released_at"] <= second["held_at"]
    assert (second["attempt"], second["outcome"], second["exit_code"], second["memory_mb"]) == (
        2, Outcome.SUCCEEDED, 0, 200)  # fmt: skip
    assert (body["attempt"], body["record"]["outcome"]) == (2, Outcome.SUCCEEDED)
    # One log across the attempts: the first's end and the retry's memory, then the second's output.
    log = api.get(f"/api/v1/jobs/{job.pk}/logs/").content.decode()
    assert "retrying with 200 MB" in log and log.endswith(f"allocated {ALLOCATE_MB}\n"), log


def test_an_exit_code_retry_waits_its_delay_before_its_next_hold(stack, api):
    response = api.post(
        "/api/v1/jobs/",
        {
            "name": "flaky", "image": "busybox", "command": "sh -c 'echo attempt; exit 3'", "cpus": "1",
            "memory_mb": "64", "time_limit_s": "60", "max_retries": "1", "retry_on": ["137", "3"],
            "retry_delay_s": str(DELAY_S),
        },
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    job = Job.objects.get(pk=response.json()["id"])

    def retried():
        job.refresh_from_db()
        return job.attempt == 2

    wait_until(retried, 60, 0.1, message=f"job {job.pk}'s first attempt to end and be retried")
    assert job.not_before is not None and job.wait_reason == "attempt 2 waits for its retry delay"
    assert (job.past_attempts[0]["outcome"], job.past_attempts[0]["exit_code"]) == (Outcome.FAILED, 3)

    # The delay is kept by the periodic pass (no nudge is due at not_before): this suite's worker runs no
    # beat, so the test sends its pass, as beat would, until the second attempt is held.
    def held_again():
        dispatch.send(dispatch.SCHEDULE_TASK)
        return Hold.objects.filter(job=job, attempt=2).exists()

    wait_until(held_again, 60, 0.5, message=f"job {job.pk}'s second attempt to be held")
    job = wait_for_release(job, 60)
    assert (job.outcome, job.exit_code, job.attempt) == (Outcome.FAILED, 3, 2), job.reason
    first, second = Hold.objects.filter(job=job).order_by("held_at")
    assert second.held_at >= first.released_at + timedelta(seconds=DELAY_S)
    assert [(r.outcome, r.exit_code) for r in Record.objects.filter(job=job).order_by("sequence")] == [
        (Outcome.FAILED, 3),
        (Outcome.FAILED, 3),
    ]
    attempts = api.get(f"/api/v1/jobs/{job.pk}/").json()["attempts"]
    assert [(a["attempt"], a["outcome"], a["exit_code"]) for a in attempts] == [
        (1, Outcome.FAILED, 3),
        (2, Outcome.FAILED, 3),
    ]
