"""The actions that move a job (jobs.lifecycle.actions): each move of the transition table, and every move it
forbids."""

from datetime import timedelta
from decimal import Decimal

import pytest

from accounting.models import Record
from jobs.lifecycle import actions
from jobs.lifecycle.actions import InvalidTransition, schedule_pass
from jobs.lifecycle.history import REAPER
from jobs.models import Job, Outcome, Stage
from jobs.scheduling import dispatch
from pool.models import HeldCore, Hold
from pool.placement.types import Placement
from tests.conftest import SENT
from tests.factories import submit_job
from tests.jobs.conftest import T0, collecting, held, running

LATER = T0 + timedelta(minutes=5)


def reloaded(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


# --- submit → rent ---------------------------------------------------------------------------------


def test_holding_compute_moves_a_submitted_job_to_rent_and_starts_the_meter(member, team, image, local_node):
    job = submit_job(member, team, image=image, cpus=1, memory_mb=128)

    holds = schedule_pass(now=T0)

    job = reloaded(job)
    assert [h.job_id for h in holds] == [job.pk]
    assert job.stage == Stage.RENT and job.held_at == T0
    hold = job.active_hold
    assert hold.node == local_node and len(hold.cpu_set) == 1 and hold.memory_mb == 128
    assert list(HeldCore.objects.filter(hold=hold).values_list("core", flat=True)) == hold.cpu_set


def test_a_job_is_held_only_once(job_at):
    job = job_at(Stage.RENT)

    with pytest.raises(InvalidTransition):
        actions.hold([Placement(job.pk, job.attempt, job.active_hold.node, [1], [], job.memory_mb)], now=LATER)
    assert schedule_pass(now=LATER) == []
    assert Hold.objects.filter(job=job).count() == 1


def test_a_cancel_requested_job_is_not_held(member, team, image, local_node):
    job = submit_job(member, team, image=image)
    Job.objects.filter(pk=job.pk).update(cancel_requested=True)

    assert schedule_pass(now=T0) == []
    assert reloaded(job).stage == Stage.SUBMIT


# --- submit → release (rejected) -------------------------------------------------------------------------


def test_reject_releases_a_submitted_job_without_a_hold_or_record(job_at):
    job = job_at(Stage.SUBMIT)

    actions.reject(job, reason="needs 99 cores", now=T0)

    job = reloaded(job)
    assert (job.stage, job.outcome, job.reason, job.released_at) == (
        Stage.RELEASE,
        Outcome.REJECTED,
        "needs 99 cores",
        T0,
    )
    assert not job.holds.exists() and not Record.objects.filter(job=job).exists()


@pytest.mark.parametrize("stage", [Stage.RENT, Stage.RUN, Stage.OUTPUT, Stage.RELEASE])
def test_only_a_submitted_job_can_be_rejected(job_at, stage):
    job = job_at(stage)

    with pytest.raises(InvalidTransition):
        actions.reject(job, reason="too big", now=LATER)
    assert reloaded(job).stage == stage


# --- rent → run ------------------------------------------------------------------------------------


def test_start_run_moves_a_held_job_to_run(job_at):
    job = job_at(Stage.RENT)

    assert actions.start_run(job, now=LATER) is True

    job = reloaded(job)
    assert job.stage == Stage.RUN and job.started_at == LATER


def test_start_run_a_second_time_returns_false_and_changes_nothing(job_at):
    job = job_at(Stage.RENT)
    assert actions.start_run(job, now=LATER)

    assert actions.start_run(reloaded(job), now=LATER + timedelta(seconds=9)) is False
    assert reloaded(job).started_at == LATER


@pytest.mark.parametrize("stage", [Stage.SUBMIT, Stage.OUTPUT, Stage.RELEASE])
def test_start_run_refuses_a_job_that_is_not_held(job_at, stage):
    job = job_at(stage)

    assert actions.start_run(job, now=LATER) is False
    assert reloaded(job).stage == stage


def test_start_run_refuses_a_job_cancelled_while_held(job_at):
    job = job_at(Stage.RENT)
    actions.cancel(job, now=LATER)

    assert actions.start_run(job, now=LATER) is False
    assert reloaded(job).outcome == Outcome.CANCELLED


# --- run → output ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "outcome, exit_code",
    [
        (Outcome.SUCCEEDED, 0),
        (Outcome.FAILED, 3),
        (Outcome.OUT_OF_MEMORY, 137),
        (Outcome.TIMED_OUT, None),
        (Outcome.CANCELLED, None),
    ],
)
def test_finish_run_moves_a_running_job_to_output_with_the_outcome_of_its_run(job_at, outcome, exit_code):
    job = job_at(Stage.RUN)

    actions.finish_run(job, outcome=outcome, exit_code=exit_code, reason="the run ended", now=LATER)

    job = reloaded(job)
    assert (job.stage, job.outcome, job.exit_code, job.finished_at) == (Stage.OUTPUT, outcome, exit_code, LATER)
    assert job.active_hold is not None, "the hold lasts until release"


@pytest.mark.parametrize("stage", [Stage.SUBMIT, Stage.RENT, Stage.OUTPUT, Stage.RELEASE])
def test_finish_run_refuses_a_job_that_is_not_running(job_at, stage):
    job = job_at(stage)

    with pytest.raises(InvalidTransition):
        actions.finish_run(job, outcome=Outcome.SUCCEEDED, exit_code=0, reason="", now=LATER)
    assert reloaded(job).stage == stage


@pytest.mark.parametrize("outcome", [Outcome.REJECTED, Outcome.NODE_LOST, "exploded"])
def test_finish_run_refuses_an_outcome_a_run_cannot_have(job_at, outcome):
    job = job_at(Stage.RUN)

    with pytest.raises(InvalidTransition):
        actions.finish_run(job, outcome=outcome, exit_code=1, reason="", now=LATER)
    assert reloaded(job).stage == Stage.RUN


# --- output → release --------------------------------------------------------------------------------


@pytest.mark.parametrize("outcome", [Outcome.SUCCEEDED, Outcome.FAILED, Outcome.TIMED_OUT, Outcome.OUT_OF_MEMORY])
def test_release_after_output_keeps_the_outcome_and_exit_code_of_the_run(job_at, outcome):
    job = collecting(running(held(job_at(Stage.SUBMIT))), outcome=outcome, exit_code=7)

    actions.release(job, outcome=outcome, reason="collected 2 outputs", now=LATER)

    job = reloaded(job)
    assert (job.stage, job.outcome, job.exit_code, job.released_at) == (Stage.RELEASE, outcome, 7, LATER)
    assert Record.objects.get(job=job).outcome == outcome


def test_release_writes_one_record_of_what_was_held_and_for_how_long(job_at):
    job = job_at(Stage.OUTPUT, cpus=2, memory_mb=512)
    hold = job.active_hold

    actions.release(job, outcome=Outcome.SUCCEEDED, reason="", now=T0 + timedelta(seconds=90))

    record = Record.objects.get(job=job)
    assert record.hold_id == hold.pk and record.team_id == job.team_id
    assert record.cpu_set == hold.cpu_set and record.cpus == 2 and record.memory_mb == 512
    assert (record.held_at, record.released_at, record.held_seconds) == (T0, T0 + timedelta(seconds=90), Decimal("90"))


def test_release_frees_the_held_cores(job_at):
    job = job_at(Stage.OUTPUT, time_limit_s=600)
    hold = job.active_hold
    assert HeldCore.objects.filter(hold=hold).exists()

    actions.release(job, outcome=Outcome.SUCCEEDED, reason="", now=LATER)

    assert not HeldCore.objects.filter(hold=hold).exists()
    hold.refresh_from_db()
    assert hold.released_at == LATER
    assert reloaded(job).active_hold is None


def test_released_cores_can_be_held_by_the_next_job(member, team, image, local_node):
    everything = len(local_node.cpu_ids)
    first = held(submit_job(member, team, image=image, cpus=everything))
    second = submit_job(member, team, image=image, cpus=everything)
    assert schedule_pass(now=T0) == []

    actions.cancel(first, now=LATER)

    assert [h.job_id for h in schedule_pass(now=LATER)] == [second.pk]


def test_a_lost_node_stops_the_meter_at_its_last_heartbeat(job_at):
    job = job_at(Stage.RUN)
    last_heartbeat = T0 + timedelta(seconds=30)

    actions.release_lost(
        job, node_name=job.active_hold.node.name, last_heartbeat=last_heartbeat, now=LATER, actor=REAPER
    )

    record = Record.objects.get(job=job)
    assert record.released_at == last_heartbeat and record.held_seconds == Decimal("30")
    assert reloaded(job).released_at == LATER


def test_releasing_twice_is_refused_and_writes_no_second_record(job_at):
    job = job_at(Stage.RELEASE)

    with pytest.raises(InvalidTransition):
        actions.release(job, outcome=Outcome.SUCCEEDED, reason="again", now=LATER)
    assert Record.objects.filter(job=job).count() == 1
    assert reloaded(job).reason == ""


def test_a_run_outcome_cannot_release_a_job_that_never_got_compute(job_at):
    job = job_at(Stage.SUBMIT)

    with pytest.raises(InvalidTransition):
        actions.release(job, outcome=Outcome.SUCCEEDED, reason="", now=LATER)
    assert reloaded(job).stage == Stage.SUBMIT


def test_release_refuses_an_unknown_outcome(job_at):
    job = job_at(Stage.OUTPUT)

    with pytest.raises(InvalidTransition):
        actions.release(job, outcome="exploded", reason="", now=LATER)
    assert reloaded(job).stage == Stage.OUTPUT
    assert not Record.objects.filter(job=job).exists()


# --- rent, run, output → release (node lost) ---------------------------------------------------------


@pytest.mark.parametrize("stage", [Stage.RENT, Stage.RUN, Stage.OUTPUT])
def test_a_lost_node_releases_its_job_with_one_record(job_at, stage):
    job = job_at(stage)

    actions.release_lost(job, node_name=job.active_hold.node.name, last_heartbeat=LATER, now=LATER, actor=REAPER)

    job = reloaded(job)
    assert (job.stage, job.outcome) == (Stage.RELEASE, Outcome.NODE_LOST)
    assert Record.objects.get(job=job).outcome == Outcome.NODE_LOST
    assert not HeldCore.objects.filter(hold__job=job).exists()


@pytest.mark.parametrize("stage", [Stage.SUBMIT, Stage.RELEASE])
def test_node_lost_needs_a_job_with_compute_held(job_at, stage):
    job = job_at(stage)

    with pytest.raises(InvalidTransition):
        actions.release_lost(job, node_name="local", last_heartbeat=LATER, now=LATER, actor=REAPER)
    assert reloaded(job).stage == stage


@pytest.mark.parametrize("stage", [Stage.RENT, Stage.RUN])
def test_a_run_outcome_releases_only_after_output(job_at, stage):
    job = job_at(stage)

    with pytest.raises(InvalidTransition):
        actions.release(job, outcome=Outcome.SUCCEEDED, reason="", now=LATER)
    assert reloaded(job).stage == stage and not Record.objects.filter(job=job).exists()


# --- cancel ----------------------------------------------------------------------------------------


def test_cancel_before_compute_is_held_releases_the_job_with_no_hold_and_no_record(job_at):
    job = job_at(Stage.SUBMIT)

    actions.cancel(job, now=LATER)

    job = reloaded(job)
    assert (job.stage, job.outcome, job.released_at) == (Stage.RELEASE, Outcome.CANCELLED, LATER)
    assert not Hold.objects.filter(job=job).exists()
    assert not Record.objects.filter(job=job).exists()


def test_cancel_while_held_releases_the_job_with_exactly_one_record(job_at):
    job = job_at(Stage.RENT)

    actions.cancel(job, now=LATER)

    job = reloaded(job)
    assert (job.stage, job.outcome) == (Stage.RELEASE, Outcome.CANCELLED)
    assert Record.objects.filter(job=job).count() == 1
    assert Record.objects.get(job=job).outcome == Outcome.CANCELLED
    assert not HeldCore.objects.filter(hold__job=job).exists()


@pytest.mark.parametrize("stage", [Stage.RUN, Stage.OUTPUT])
def test_cancel_of_a_running_job_asks_its_worker_and_leaves_the_stage(job_at, stage):
    job = job_at(stage)

    actions.cancel(job, now=LATER)

    job = reloaded(job)
    assert job.cancel_requested is True
    assert job.stage == stage and job.outcome in ("", Outcome.SUCCEEDED)
    assert job.active_hold is not None and not Record.objects.filter(job=job).exists()


def test_cancel_of_a_running_job_is_idempotent(job_at):
    job = job_at(Stage.RUN)

    actions.cancel(job, now=LATER)
    actions.cancel(job, now=LATER + timedelta(seconds=1))

    job = reloaded(job)
    assert job.cancel_requested and job.stage == Stage.RUN


def test_the_worker_finishes_a_cancelled_run_as_cancelled(job_at):
    job = job_at(Stage.RUN)
    actions.cancel(job, now=LATER)

    collecting(job, outcome=Outcome.CANCELLED, exit_code=None, now=LATER)
    actions.release(job, outcome=Outcome.CANCELLED, reason="cancelled while running", now=LATER)

    job = reloaded(job)
    assert (job.stage, job.outcome) == (Stage.RELEASE, Outcome.CANCELLED)
    assert Record.objects.filter(job=job).count() == 1


def test_cancel_of_a_released_job_changes_nothing(job_at):
    job = job_at(Stage.RELEASE)
    before = reloaded(job)

    actions.cancel(job, now=LATER)
    actions.cancel(job, now=LATER + timedelta(seconds=1))

    after = reloaded(job)
    assert (after.stage, after.outcome, after.released_at, after.cancel_requested) == (
        before.stage,
        before.outcome,
        before.released_at,
        False,
    )
    assert Record.objects.filter(job=job).count() == 1


def test_cancelling_a_held_job_twice_writes_one_record(job_at):
    job = job_at(Stage.RENT)

    actions.cancel(job, now=LATER)
    actions.cancel(job, now=LATER + timedelta(seconds=1))

    assert reloaded(job).released_at == LATER
    assert Record.objects.filter(job=job).count() == 1


# --- after commit ----------------------------------------------------------------------------------


def test_releasing_held_compute_asks_for_a_scheduler_pass(job_at, django_capture_on_commit_callbacks):
    job = job_at(Stage.OUTPUT)
    SENT.clear()

    with django_capture_on_commit_callbacks(execute=True):  # the release's record also appends its ledger head
        actions.release(job, outcome=Outcome.SUCCEEDED, reason="", now=LATER)

    assert SENT == [(dispatch.SCHEDULE_TASK, None, None)]


def test_cancelling_a_job_that_held_nothing_frees_nothing_to_schedule(job_at, django_capture_on_commit_callbacks):
    job = job_at(Stage.SUBMIT)

    with django_capture_on_commit_callbacks() as callbacks:
        actions.cancel(job, now=LATER)

    assert callbacks == []


def test_cancel_records_who_asked(job_at, teammate):
    running_job, waiting_job = job_at(Stage.RUN), job_at(Stage.SUBMIT)

    actions.cancel(running_job, now=LATER, acting_user=teammate)
    actions.cancel(waiting_job, now=LATER, acting_user=teammate)

    assert reloaded(running_job).cancelled_by == teammate and reloaded(running_job).cancel_requested
    assert (reloaded(waiting_job).cancelled_by, reloaded(waiting_job).outcome) == (teammate, Outcome.CANCELLED)
