"""A task the broker delivers again (a restart restored it, the watchdog sent it again, a nudge came
twice) for a job already past its step does nothing: the database decides, not the message."""

from unittest import mock

import docker
import pytest
from django.utils import timezone

from accounting.models import Record
from jobs.lifecycle import actions
from jobs.models import Job, JobEvent, Outcome, Stage
from jobs.tasks import schedule_jobs
from pool.models import Hold
from tests.conftest import SENT, run_here
from tests.factories import submit_job
from worker.sandbox.docker import JOB_LABEL
from worker.tasks import run_job


def trail(job: Job) -> tuple:
    """Everything a run would change: the job's row, its events, holds and records."""
    job.refresh_from_db()
    return (
        (job.stage, job.outcome, job.attempt, job.started_at, job.released_at),
        list(JobEvent.objects.filter(job=job).values_list("event", "stage", "attempt")),
        list(Hold.objects.filter(job=job).values_list("pk", "released_at")),
        Record.objects.filter(job=job).count(),
    )


@pytest.mark.docker
def test_the_run_task_again_for_a_job_that_ran_and_was_released_does_nothing(member, team, local_node, images):
    job = run_here(submit_job(member, team, image="busybox", command="echo once"))
    assert job.outcome == Outcome.SUCCEEDED
    before = trail(job)

    run_job(str(job.pk))

    assert trail(job) == before
    client = docker.from_env()
    try:
        assert not client.containers.list(all=True, filters={"label": f"{JOB_LABEL}={job.pk}"})
    finally:
        client.close()


def test_the_run_task_again_for_a_job_cancelled_while_held_starts_nothing(member, team, local_node):
    job = submit_job(member, team, command="echo never")
    actions.schedule_pass(now=timezone.now())
    job.refresh_from_db()
    assert job.stage == Stage.RENT
    actions.cancel(job, now=timezone.now())
    before = trail(job)

    with mock.patch("worker.runner.get_sandbox") as sandbox:
        run_job(str(job.pk))

    assert trail(job) == before and sandbox.mock_calls == []


def test_the_scheduler_pass_again_holds_nothing_more_and_sends_no_run_twice(
    member, team, local_node, django_capture_on_commit_callbacks
):
    jobs = [submit_job(member, team, command="true") for _ in range(2)]
    SENT.clear()

    with django_capture_on_commit_callbacks(execute=True):
        assert schedule_jobs() == 2
    runs = [sent for sent in SENT if sent[0] == "worker.run"]
    before = [trail(job) for job in jobs]
    with django_capture_on_commit_callbacks(execute=True):
        assert schedule_jobs() == 0

    assert [trail(job) for job in jobs] == before
    assert [sent for sent in SENT if sent[0] == "worker.run"] == runs
    assert sorted(args[0] for _, args, _ in runs) == sorted(str(job.pk) for job in jobs)
