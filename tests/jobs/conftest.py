"""Jobs at each step, moved there by the functions that own each transition."""

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Outcome, Stage
from tests.factories import RuntimeImageFactory, submit_job

T0 = timezone.make_aware(datetime(2030, 1, 1, 2, 0, 0))


@pytest.fixture
def image(db):
    return RuntimeImageFactory()


def held(job: Job, *, now: datetime = T0) -> Job:
    """SUBMIT → RENT through a scheduler pass (the pool must have room)."""
    schedule_pass(now=now)
    job.refresh_from_db()
    assert job.stage == Stage.RENT, f"the scheduler did not hold {job}"
    return job


def running(job: Job, *, now: datetime = T0 + timedelta(seconds=1)) -> Job:
    assert actions.start_run(job, now=now)
    return job


def collecting(job: Job, *, outcome: str = Outcome.SUCCEEDED, exit_code: int | None = 0, now=None) -> Job:
    actions.finish_run(job, outcome=outcome, exit_code=exit_code, reason="", now=now or T0 + timedelta(seconds=60))
    return job


def released(job: Job, *, now=None) -> Job:
    return actions.release(job, outcome=Outcome.SUCCEEDED, reason="", now=now or T0 + timedelta(seconds=61))


STEPS = {
    Stage.SUBMIT: lambda job: job,
    Stage.RENT: held,
    Stage.RUN: lambda job: running(held(job)),
    Stage.OUTPUT: lambda job: collecting(running(held(job))),
    Stage.RELEASE: lambda job: released(collecting(running(held(job)))),
}


@pytest.fixture
def job_at(member, team, image, local_node):
    """A factory: a member's job moved to the given stage."""

    def make(stage: str, **request) -> Job:
        job = submit_job(member, team, image=image, **request)
        job = STEPS[stage](job)
        job.refresh_from_db()
        assert job.stage == stage
        return job

    return make
