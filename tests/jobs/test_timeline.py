"""The job page's steps (jobs.web.figures.timeline): each step shows its own duration, and the step a job
ended badly at is the one marked; a running job's clock and last usage sample (jobs.web.figures.running)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from jobs.lifecycle.history import events_of
from jobs.models import Job, Outcome, Stage
from jobs.web.figures import ended_at, running, state_key, timeline
from tests.factories import ended_job

AT = datetime(2030, 3, 12, 6, 0, tzinfo=UTC)


def steps_of(job: Job) -> dict:
    return {s.step: s for s in timeline(job, list(events_of(job)))}


def ended(member, team, outcome: str, **kwargs) -> Job:
    return ended_job(member, team, outcome=outcome, at=AT, waited=timedelta(minutes=2), ran=timedelta(seconds=20),
                     **kwargs)  # fmt: skip


def test_each_step_shows_its_own_duration(member, team, local_node):
    job = ended(member, team, Outcome.SUCCEEDED)

    steps = steps_of(job)

    assert steps[Stage.SUBMIT].took is None
    assert (steps[Stage.RENT].took, steps[Stage.RENT].took_words) == (timedelta(minutes=2), "queue wait")
    assert (steps[Stage.RUN].took, steps[Stage.RUN].took_words) == (timedelta(seconds=20), "run time")
    assert (steps[Stage.OUTPUT].took, steps[Stage.OUTPUT].took_words) == (timedelta(0), "collection")
    assert steps[Stage.RELEASE].took == timedelta(minutes=2, seconds=20)
    assert not any(s.ended_here for s in steps.values()) and ended_at(job) is None


@pytest.mark.parametrize(
    ("outcome", "kwargs", "step"),
    [
        (Outcome.FAILED, {"exit_code": 3, "reason": "exit code 3"}, Stage.RUN),
        (Outcome.TIMED_OUT, {}, Stage.RUN),
        (Outcome.OUT_OF_MEMORY, {}, Stage.RUN),
        (Outcome.NODE_LOST, {}, Stage.RUN),
        # The run exited 0; its outputs failed it (over the team's store quota, say).
        (Outcome.FAILED, {"exit_code": 0, "reason": "over the store quota of team red"}, Stage.OUTPUT),
        (Outcome.REJECTED, {}, Stage.RENT),
    ],
)
def test_the_step_that_ended_the_job_badly_is_the_one_marked(member, team, local_node, outcome, kwargs, step):
    job = ended(member, team, outcome, **kwargs)

    steps = steps_of(job)

    assert ended_at(job) == step
    assert [s.step for s in steps.values() if s.ended_here] == [step]
    assert not steps[Stage.RELEASE].ended_here


def test_a_job_cancelled_while_waiting_ended_at_rent(member, team, local_node):
    job = ended_job(member, team, outcome=Outcome.CANCELLED, at=AT, ran=timedelta(0))

    assert job.held_at is None and ended_at(job) == Stage.RENT
    assert [s.step for s in steps_of(job).values() if s.ended_here] == [Stage.RENT]


def test_a_job_cancelled_while_running_ended_at_run(member, team, local_node):
    job = ended(member, team, Outcome.CANCELLED)

    assert ended_at(job) == Stage.RUN


def test_a_step_under_way_has_a_start_and_no_duration(job_at):
    waiting, run = job_at(Stage.SUBMIT), job_at(Stage.RUN)

    assert steps_of(waiting)[Stage.RENT].since == waiting.submitted_at
    assert steps_of(waiting)[Stage.RENT].took is None
    assert steps_of(run)[Stage.RUN].since == run.started_at and steps_of(run)[Stage.RUN].took is None
    assert steps_of(run)[Stage.RENT].since is None and steps_of(run)[Stage.RENT].took is not None
    assert ended_at(run) is None


def test_a_running_job_has_elapsed_and_remaining_time_against_its_limit(job_at):
    job = job_at(Stage.RUN, time_limit_s=600)

    clock = running(job, job.started_at + timedelta(seconds=150))

    assert clock is not None
    assert (clock.elapsed, clock.remaining, clock.share) == (timedelta(seconds=150), timedelta(seconds=450), 0.25)
    assert clock.cpu_percent is None and clock.sampled_at is None  # not sampled yet
    assert running(job, job.started_at + timedelta(hours=1)).remaining == timedelta(0)


def test_a_running_job_shows_its_last_usage_sample(job_at):
    job = job_at(Stage.RUN)
    sampled = job.started_at + timedelta(seconds=30)
    job.usage_now = {"cpu_percent": 87.4, "memory_mb": 41, "at": sampled.isoformat()}

    clock = running(job, sampled + timedelta(seconds=3))

    assert (clock.cpu_percent, clock.memory_mb, clock.sampled_ago) == (87.4, 41, timedelta(seconds=3))


def test_a_job_not_running_has_no_clock(job_at):
    assert running(job_at(Stage.SUBMIT), timezone.now()) is None
    assert running(job_at(Stage.RENT), timezone.now()) is None


def test_a_new_usage_sample_changes_the_live_parts_key(job_at):
    job = job_at(Stage.RUN)
    before = state_key(job)

    job.usage_now = {"cpu_percent": 50.0, "memory_mb": 10, "at": timezone.now().isoformat()}

    assert state_key(job) != before
