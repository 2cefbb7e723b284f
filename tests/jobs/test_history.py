"""A job's history (jobs.lifecycle.history): one event per change, written by the action in the change's own
transaction, naming the attempt and who or what acted."""

from datetime import timedelta

import pytest

from accounting.models import Record
from jobs.lifecycle import actions
from jobs.lifecycle.actions import InvalidTransition, schedule_pass
from jobs.lifecycle.history import REAPER
from jobs.models import JobEvent, Outcome, Stage
from tests.factories import submit_job
from tests.jobs.conftest import T0, collecting, held, released, running

LATER = T0 + timedelta(minutes=5)


def history(job) -> list[tuple]:
    events = JobEvent.objects.filter(job=job).order_by("at", "id")
    return list(events.values_list("stage", "outcome", "attempt", "actor"))


def test_every_step_of_a_job_leaves_one_event_with_who_acted(member, team, image, local_node):
    node = f"node {local_node.name}"

    job = released(collecting(running(held(submit_job(member, team, image=image)))))

    assert history(job) == [
        (Stage.SUBMIT, "", 1, "alice"),
        (Stage.RENT, "", 1, "scheduler"),
        (Stage.RUN, "", 1, node),
        (Stage.OUTPUT, Outcome.SUCCEEDED, 1, node),
        (Stage.RELEASE, Outcome.SUCCEEDED, 1, node),
    ]
    assert JobEvent.objects.get(job=job, stage=Stage.RENT).reason == f"on node {local_node.name}"


def test_each_event_is_dated_by_the_action_that_made_it(job_at):
    job = job_at(Stage.RELEASE)

    at = dict(JobEvent.objects.filter(job=job).values_list("stage", "at"))

    assert at == {
        Stage.SUBMIT: job.submitted_at, Stage.RENT: job.held_at, Stage.RUN: job.started_at,
        Stage.OUTPUT: job.finished_at, Stage.RELEASE: job.released_at,
    }  # fmt: skip


def test_a_refused_transition_writes_no_event(job_at):
    job = job_at(Stage.RELEASE)
    before = history(job)

    with pytest.raises(InvalidTransition):
        actions.release(job, outcome=Outcome.SUCCEEDED, reason="again", now=LATER)
    assert not actions.start_run(job, now=LATER)

    assert history(job) == before


def test_an_event_rolls_back_with_its_change(job_at, monkeypatch):
    """The event and the move are one transaction: the record failing after both undoes both."""
    job = job_at(Stage.OUTPUT)

    def broken(*args, **kwargs):
        raise RuntimeError("the ledger is down")

    monkeypatch.setattr(actions, "write_record", broken)
    with pytest.raises(RuntimeError):
        actions.release(job, outcome=Outcome.SUCCEEDED, reason="", now=LATER)

    job.refresh_from_db()
    assert job.stage == Stage.OUTPUT
    assert [stage for stage, *_ in history(job)] == [Stage.SUBMIT, Stage.RENT, Stage.RUN, Stage.OUTPUT]


def test_a_scheduler_pass_that_rolls_back_leaves_no_hold_event(member, team, image, local_node, monkeypatch):
    job = submit_job(member, team, image=image)

    def broken(*args, **kwargs):
        raise RuntimeError("no cores after all")

    monkeypatch.setattr(actions, "hold_many", broken)
    with pytest.raises(RuntimeError):
        schedule_pass(now=T0)

    assert history(job) == [(Stage.SUBMIT, "", 1, "alice")]


# --- who acted -----------------------------------------------------------------------------------


def test_a_member_cancelling_a_waiting_job_is_named(member, team, image, local_node):
    job = submit_job(member, team, image=image)

    actions.cancel(job, now=LATER, acting_user=member)

    event = JobEvent.objects.filter(job=job).last()
    assert (event.stage, event.outcome, event.actor, event.actor_user) == (
        Stage.RELEASE, Outcome.CANCELLED, "alice", member,
    )  # fmt: skip
    assert event.reason == "cancelled before compute was held"


def test_an_operator_cancelling_someone_elses_job_is_named(job_at, operator):
    job = job_at(Stage.RENT)

    actions.cancel(job, now=LATER, acting_user=operator)

    event = JobEvent.objects.filter(job=job).last()
    assert (event.stage, event.outcome, event.actor, event.actor_user) == (
        Stage.RELEASE, Outcome.CANCELLED, "olga", operator,
    )  # fmt: skip


def test_a_cancel_asked_of_a_running_job_names_who_asked_and_its_node_ends_it(job_at, teammate, local_node):
    job = job_at(Stage.RUN)

    actions.cancel(job, now=LATER, acting_user=teammate)
    collecting(job, outcome=Outcome.CANCELLED, exit_code=None, now=LATER)

    assert history(job)[-2:] == [
        (Stage.RUN, "", 1, "bob"),
        (Stage.OUTPUT, Outcome.CANCELLED, 1, f"node {local_node.name}"),
    ]


def test_a_request_no_node_can_hold_is_rejected_by_the_scheduler(member, team, image, local_node):
    job = submit_job(member, team, image=image, cpus=len(local_node.cpu_ids) + 1)

    schedule_pass(now=T0)

    event = JobEvent.objects.filter(job=job).last()
    assert (event.stage, event.outcome, event.actor) == (Stage.RELEASE, Outcome.REJECTED, "scheduler")
    assert event.reason.startswith("can never be held")


def test_a_lost_node_is_the_reapers_doing(job_at, local_node):
    job = job_at(Stage.RUN)

    actions.release_lost(job, node_name=local_node.name, last_heartbeat=LATER, now=LATER, actor=REAPER)

    event = JobEvent.objects.filter(job=job).last()
    assert (event.stage, event.outcome, event.actor) == (Stage.RELEASE, Outcome.NODE_LOST, "reaper")
    assert f"node {local_node.name} was lost" in event.reason


# --- attempts -------------------------------------------------------------------------------------


def test_each_attempt_of_a_retried_job_keeps_its_own_times_and_record(member, team, image, local_node):
    job = submit_job(member, team, image=image, max_retries=1)
    first_held, first_started, lost = T0, T0 + timedelta(seconds=1), T0 + timedelta(seconds=30)
    running(held(job, now=first_held), now=first_started)
    actions.release_lost(job, node_name=local_node.name, last_heartbeat=lost, now=lost, actor=REAPER)
    job.refresh_from_db()
    second_held, second_started = lost + timedelta(seconds=5), lost + timedelta(seconds=6)
    finished, done = lost + timedelta(seconds=60), lost + timedelta(seconds=61)
    released(collecting(running(held(job, now=second_held), now=second_started), now=finished), now=done)

    times = {(e.attempt, e.stage): e.at for e in JobEvent.objects.filter(job=job).exclude(stage=Stage.SUBMIT)}
    assert times == {
        (1, Stage.RENT): first_held, (1, Stage.RUN): first_started,
        (2, Stage.RENT): second_held, (2, Stage.RUN): second_started,
        (2, Stage.OUTPUT): finished, (2, Stage.RELEASE): done,
    }  # fmt: skip
    retry = JobEvent.objects.get(job=job, attempt=1, stage=Stage.SUBMIT, actor="reaper")
    assert (retry.at, retry.outcome) == (lost, Outcome.NODE_LOST) and retry.reason.endswith("; retrying")
    records = Record.objects.filter(job=job).order_by("attempt")
    assert [(r.attempt, r.held_at, r.outcome) for r in records] == [
        (1, first_held, Outcome.NODE_LOST), (2, second_held, Outcome.SUCCEEDED),
    ]  # fmt: skip
