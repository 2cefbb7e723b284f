"""Node loss: the reaper declares a silent node lost, releases its jobs `node_lost` (the meter stops at
the last heartbeat) or sends them back to the queue as a new attempt while retries are left."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from accounting.models import Budget, BudgetUnit, Record
from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.lifecycle.history import REAPER
from jobs.models import Job, JobEvent, Outcome, OutputFile, Stage
from jobs.storage import logs
from pool.models import Hold, Node
from pool.nodes import Capacity, heartbeat, register
from tests.factories import submit_job
from worker.logpump import LogPump
from worker.reaper import reap_lost_nodes as reap

T0 = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)
LOST_S = 60


@pytest.fixture(autouse=True)
def _lost_after(settings):
    settings.E31_NODE_LOST_S = LOST_S


def add_node(name: str, *, cpus: int = 4, now: datetime = T0) -> Node:
    return register(name, Capacity(cpu_ids=list(range(cpus)), memory_mb=4096, gpu_ids=[]), now=now)


def held_on(job: Job, node_name: str, *, now: datetime) -> Job:
    schedule_pass(now=now)
    job.refresh_from_db()
    assert job.stage == Stage.RENT and job.active_hold.node.name == node_name
    return job


def running_on(job: Job, node_name: str, *, now: datetime) -> Job:
    held_on(job, node_name, now=now)
    assert actions.start_run(job, now=now + timedelta(seconds=1))
    return job


def fresh(obj):
    obj.refresh_from_db()
    return obj


def test_a_silent_node_is_lost_and_its_job_released_with_the_meter_stopped_at_the_last_heartbeat(member, team):
    node = add_node("n1")
    job = running_on(submit_job(member, team, cpus=2), "n1", now=T0)
    last = T0 + timedelta(seconds=10)
    assert heartbeat("n1", now=last)
    later = last + timedelta(seconds=LOST_S + 1)

    assert reap(now=later) == ["n1"]

    assert fresh(node).state == Node.State.OFFLINE
    job.refresh_from_db()
    assert (job.stage, job.outcome, job.attempt) == (Stage.RELEASE, Outcome.NODE_LOST, 1)
    assert job.released_at == later
    assert "node n1 was lost" in job.reason
    [hold] = Hold.objects.filter(job=job)
    assert hold.released_at == last  # the meter stops at the last heartbeat, not when the loss was noticed
    [record] = Record.objects.filter(job=job)
    assert (record.hold, record.outcome, record.released_at) == (hold, Outcome.NODE_LOST, last)
    assert record.held_seconds == Decimal("10.000")


def test_the_reaper_is_named_as_who_released_a_lost_nodes_job(member, team):
    add_node("n1")
    job = running_on(submit_job(member, team), "n1", now=T0)

    reap(now=T0 + timedelta(seconds=LOST_S + 1))

    event = JobEvent.objects.get(job=job, event="lose")
    assert (event.stage, event.outcome, event.actor) == (Stage.RELEASE, Outcome.NODE_LOST, "reaper")


def test_a_node_heard_from_within_the_limit_is_untouched(member, team):
    add_node("n1", cpus=1)
    add_node("n2", cpus=1)
    silent = running_on(submit_job(member, team), "n1", now=T0)
    alive = running_on(submit_job(member, team), "n2", now=T0)
    later = T0 + timedelta(seconds=LOST_S + 30)
    assert heartbeat("n2", now=T0 + timedelta(seconds=30))  # exactly E31_NODE_LOST_S ago: not lost yet

    assert reap(now=later) == ["n1"]

    assert fresh(silent).stage == Stage.RELEASE
    assert Node.objects.get(name="n2").state == Node.State.ACTIVE
    alive.refresh_from_db()
    assert (alive.stage, alive.attempt) == (Stage.RUN, 1)
    assert alive.active_hold is not None
    assert not Record.objects.filter(job=alive).exists()


@pytest.mark.parametrize("stage", [Stage.RENT, Stage.RUN, Stage.OUTPUT])
def test_a_job_is_lost_at_any_step_it_holds_compute(member, team, stage):
    add_node("n1")
    job = held_on(submit_job(member, team), "n1", now=T0)
    if stage in (Stage.RUN, Stage.OUTPUT):
        assert actions.start_run(job, now=T0)
    if stage == Stage.OUTPUT:
        actions.finish_run(job, outcome=Outcome.SUCCEEDED, exit_code=0, reason="", now=T0)

    reap(now=T0 + timedelta(seconds=LOST_S + 1))

    job.refresh_from_db()
    assert (job.stage, job.outcome) == (Stage.RELEASE, Outcome.NODE_LOST)
    assert [r.outcome for r in Record.objects.filter(job=job)] == [Outcome.NODE_LOST]


def test_a_job_with_a_retry_left_goes_back_to_the_queue_and_is_held_again_elsewhere(member, team):
    add_node("n1")
    job = running_on(submit_job(member, team, cpus=2, max_retries=1), "n1", now=T0)
    first = job.active_hold
    lost_at = T0 + timedelta(seconds=LOST_S + 1)

    reap(now=lost_at)

    job.refresh_from_db()
    assert (job.stage, job.attempt, job.outcome, job.held_at, job.started_at) == (Stage.SUBMIT, 2, "", None, None)
    assert "attempt 1: node n1 was lost" in job.reason
    first.refresh_from_db()
    assert first.attempt == 1 and first.released_at == T0  # registered at T0, never heard from again
    [record] = Record.objects.filter(job=job)
    assert (record.hold, record.outcome) == (first, Outcome.NODE_LOST)

    add_node("n2", now=lost_at)
    held_on(job, "n2", now=lost_at + timedelta(seconds=1))
    second = job.active_hold
    assert second != first and second.attempt == 2 and second.released_at is None
    assert Hold.objects.filter(job=job).count() == 2

    # The second attempt runs to its end: its own hold, its own record.
    assert actions.start_run(job, now=lost_at + timedelta(seconds=2))
    actions.finish_run(job, outcome=Outcome.SUCCEEDED, exit_code=0, reason="", now=lost_at + timedelta(seconds=9))
    actions.release(job, outcome=Outcome.SUCCEEDED, reason="", now=lost_at + timedelta(seconds=10), attempt=2)
    outcomes = {r.hold_id: r.outcome for r in Record.objects.filter(job=job)}
    assert outcomes == {first.pk: Outcome.NODE_LOST, second.pk: Outcome.SUCCEEDED}


def test_a_retry_whose_worst_case_would_pass_the_teams_budget_is_not_made(member, team, settings):
    settings.E31_RATE_CORE_HOUR, settings.E31_RATE_GB_HOUR = Decimal("1"), Decimal("0")
    settings.E31_HOLD_OVERHEAD_S = 60
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("1.00"))
    add_node("n1")
    # Worst case 0.90 (54 min on one core), within 1.00; the lost attempt spent some of it, so another
    # 0.90 would not fit.
    job = running_on(submit_job(member, team, cpus=1, time_limit_s=3180, max_retries=2), "n1", now=T0)
    heard = T0 + timedelta(minutes=10)
    heartbeat("n1", now=heard)

    reap(now=heard + timedelta(seconds=LOST_S + 1))

    job.refresh_from_db()
    assert (job.stage, job.outcome, job.attempt) == (Stage.RELEASE, Outcome.NODE_LOST, 1)
    assert job.reason.endswith(f"not retried: another attempt could take team {team.slug} past its budget of 1.00 EUR")
    [record] = Record.objects.filter(job=job)
    assert record.outcome == Outcome.NODE_LOST and record.cost == Decimal("0.166667")


def test_a_job_out_of_retries_is_released_node_lost(member, team):
    add_node("n1")
    job = running_on(submit_job(member, team, max_retries=1), "n1", now=T0)
    reap(now=T0 + timedelta(seconds=LOST_S + 1))
    t1 = T0 + timedelta(minutes=5)
    add_node("n2", now=t1)
    running_on(job, "n2", now=t1)

    reap(now=t1 + timedelta(seconds=LOST_S + 1))

    job.refresh_from_db()
    assert (job.stage, job.outcome, job.attempt) == (Stage.RELEASE, Outcome.NODE_LOST, 2)
    assert not Hold.objects.filter(job=job, released_at__isnull=True).exists()
    records = Record.objects.filter(job=job).order_by("sequence")
    assert [(r.node, r.outcome, r.hold.attempt) for r in records] == [
        ("n1", Outcome.NODE_LOST, 1),
        ("n2", Outcome.NODE_LOST, 2),
    ]


def test_reaping_twice_changes_nothing_more(member, team):
    add_node("n1")
    add_node("n2", cpus=1)
    lost = running_on(submit_job(member, team, cpus=2), "n1", now=T0)
    retried = held_on(submit_job(member, team, cpus=2, max_retries=1), "n1", now=T0)
    later = T0 + timedelta(seconds=LOST_S + 1)
    reap(now=later)
    before = {j.pk: (j.stage, j.attempt, j.outcome, j.reason) for j in (fresh(lost), fresh(retried))}

    assert reap(now=later + timedelta(seconds=1)) == []
    assert reap(now=later + timedelta(hours=1)) == []

    after = {j.pk: (j.stage, j.attempt, j.outcome, j.reason) for j in (fresh(lost), fresh(retried))}
    assert after == before
    assert Record.objects.count() == 2
    assert Hold.objects.count() == 2


def test_a_worker_of_the_lost_attempt_can_no_longer_move_the_job(member, team):
    add_node("n1")
    job = running_on(submit_job(member, team, max_retries=1), "n1", now=T0)
    stale = Job.objects.get(pk=job.pk)  # what the old node's worker still has in hand: attempt 1, running
    lost_at = T0 + timedelta(seconds=LOST_S + 1)
    reap(now=lost_at)
    add_node("n2", now=lost_at)
    held_on(job, "n2", now=lost_at)  # attempt 2 is held and waits for its worker

    with pytest.raises(actions.InvalidTransition):
        actions.finish_run(stale, outcome=Outcome.SUCCEEDED, exit_code=0, reason="", now=lost_at)
    with pytest.raises(actions.InvalidTransition):
        actions.release(stale, outcome=Outcome.SUCCEEDED, reason="", now=lost_at, attempt=1)
    assert actions.start_run(stale, now=lost_at) is False  # a late redelivery of attempt 1's run

    job.refresh_from_db()
    assert (job.stage, job.attempt, job.active_hold.node.name) == (Stage.RENT, 2, "n2")
    assert Record.objects.filter(job=job).count() == 1
    assert actions.start_run(job, now=lost_at + timedelta(seconds=1))  # attempt 2's own worker still can


def test_a_job_cancelled_while_running_on_a_lost_node_is_not_retried(member, team):
    add_node("n1")
    job = running_on(submit_job(member, team, max_retries=2), "n1", now=T0)
    assert actions.cancel(job, now=T0 + timedelta(seconds=5)).cancel_requested  # the worker never got to stop it

    reap(now=T0 + timedelta(seconds=LOST_S + 1))
    add_node("n2", now=T0 + timedelta(minutes=2))
    schedule_pass(now=T0 + timedelta(minutes=2))

    job.refresh_from_db()
    assert (job.stage, job.outcome, job.attempt) == (Stage.RELEASE, Outcome.NODE_LOST, 1)
    assert "cancel" in job.reason
    assert Hold.objects.filter(job=job).count() == 1
    assert [r.outcome for r in Record.objects.filter(job=job)] == [Outcome.NODE_LOST]


def test_a_heartbeat_from_a_node_declared_lost_is_refused(db):
    node = add_node("n1")
    reap(now=T0 + timedelta(seconds=LOST_S + 1))

    assert heartbeat("n1", now=T0 + timedelta(seconds=LOST_S + 2)) is False
    assert heartbeat("nobody", now=T0) is False

    node.refresh_from_db()
    assert (node.state, node.last_heartbeat) == (Node.State.OFFLINE, T0)


def test_registering_again_brings_a_lost_node_back(member, team):
    add_node("n1")
    reap(now=T0 + timedelta(seconds=LOST_S + 1))
    back_at = T0 + timedelta(minutes=10)

    node = add_node("n1", cpus=2, now=back_at)

    assert (node.state, node.last_heartbeat, node.cpu_ids) == (Node.State.ACTIVE, back_at, [0, 1])
    assert heartbeat("n1", now=back_at + timedelta(seconds=1))
    assert reap(now=back_at + timedelta(seconds=2)) == []
    job = submit_job(member, team)
    held_on(job, "n1", now=back_at + timedelta(seconds=3))


def test_a_draining_node_that_goes_silent_is_lost_too(member, team):
    from pool.nodes import set_state

    node = add_node("n1")
    job = running_on(submit_job(member, team), "n1", now=T0)
    set_state(node, Node.State.DRAINING, now=timezone.now())

    assert reap(now=T0 + timedelta(seconds=LOST_S + 1)) == ["n1"]

    assert (fresh(job).stage, fresh(job).outcome) == (Stage.RELEASE, Outcome.NODE_LOST)
    assert fresh(node).state == Node.State.OFFLINE


def test_a_late_reaper_of_the_lost_node_leaves_the_next_attempt_alone(member, team):
    # Two reaper passes overlap: the second listed the job on n1 before the first retried it, and the
    # retry has been held on n2 since.
    add_node("n1")
    job = running_on(submit_job(member, team, max_retries=1), "n1", now=T0)
    lost_at = T0 + timedelta(seconds=LOST_S + 1)
    reap(now=lost_at)
    add_node("n2", now=lost_at)
    held_on(job, "n2", now=lost_at)

    with pytest.raises(actions.InvalidTransition):
        actions.release_lost(job, node_name="n1", last_heartbeat=T0, now=lost_at + timedelta(seconds=1), actor=REAPER)

    job.refresh_from_db()
    assert (job.stage, job.attempt, job.active_hold.node.name) == (Stage.RENT, 2, "n2")
    assert Record.objects.filter(job=job).count() == 1


# --- one log and fresh outputs across attempts ---------------------------------------------------------


def lost_and_retried_onto(job: Job, node_name: str) -> Job:
    lost_at = T0 + timedelta(seconds=LOST_S + 1)
    reap(now=lost_at)
    add_node(node_name, now=lost_at)
    return running_on(fresh(job), node_name, now=lost_at)


def test_the_next_attempt_writes_its_log_after_the_lost_attempts(member, team, tmp_path):
    add_node("n1")
    job = running_on(submit_job(member, team, max_retries=1), "n1", now=T0)
    logs.append(job.pk, 0, b"attempt 1 was here\n")

    job = lost_and_retried_onto(job, "n2")
    pump = LogPump(iter([b"attempt 2 is here\n"]), tmp_path / "log.txt", job.pk)
    pump.finish()

    text = logs.read_log(job.pk)[0].decode()
    assert text.startswith("attempt 1 was here\n[e31] attempt 1: node n1 was lost")
    assert text.endswith("retrying\nattempt 2 is here\n")


def test_a_node_lost_while_collecting_leaves_the_next_attempt_a_clean_slate(
    member, team, django_capture_on_commit_callbacks
):
    add_node("n1")
    job = running_on(submit_job(member, team, max_retries=1), "n1", now=T0)
    actions.finish_run(job, outcome=Outcome.SUCCEEDED, exit_code=0, reason="", now=T0 + timedelta(seconds=2))
    OutputFile.objects.create(job=job, path="model.json", size=2, sha256="0" * 64)
    logs.append(job.pk, 0, b"attempt 1\n")
    logs.seal(job.pk)

    with django_capture_on_commit_callbacks(execute=True):
        job = lost_and_retried_onto(job, "n2")

    assert not OutputFile.objects.filter(job=job).exists(), "the lost attempt's outputs are not the job's"
    OutputFile.objects.create(job=job, path="model.json", size=3, sha256="1" * 64)  # attempt 2 collects its own
    assert not logs.is_sealed(job.pk) and logs.read_log(job.pk)[0].startswith(b"attempt 1\n")


def test_a_job_lost_for_good_has_its_log_sealed(member, team, django_capture_on_commit_callbacks):
    add_node("n1")
    job = running_on(submit_job(member, team), "n1", now=T0)
    logs.append(job.pk, 0, b"all it said\n")

    with django_capture_on_commit_callbacks(execute=True):
        reap(now=T0 + timedelta(seconds=LOST_S + 1))

    assert fresh(job).outcome == Outcome.NODE_LOST
    assert logs.is_sealed(job.pk) and logs.read_log(job.pk)[0] == b"all it said\n"
