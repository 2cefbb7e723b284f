"""The job state machine. Each transition is decided here and nowhere else.

Moves are conditional updates on the stage (and attempt) columns, so a second delivery of the same
event, or two events racing (a cancel against a start, a reaper against a worker), change the job at
most once.
"""

from datetime import datetime

from django.db import transaction

from accounting.meter import Usage, write_record
from jobs import dispatch
from jobs.models import Job, Outcome, Stage
from pool.holds import release_hold


class InvalidTransition(Exception):
    pass


RELEASABLE_FROM = {
    Outcome.REJECTED: {Stage.SUBMIT},
    Outcome.CANCELLED: {Stage.SUBMIT, Stage.RENT, Stage.RUN, Stage.OUTPUT},
    Outcome.NODE_LOST: {Stage.RENT, Stage.RUN, Stage.OUTPUT},
}
# Outcomes of a run are released from the output step (or straight from rent/run when the run
# never got to collect anything, e.g. staging failed).
RUN_OUTCOMES = {Outcome.SUCCEEDED, Outcome.FAILED, Outcome.TIMED_OUT, Outcome.OUT_OF_MEMORY}


def mark_held_many(jobs: list[Job], *, now: datetime) -> None:
    """submit → rent: compute is held; the meter starts. Called by pool.holds.hold_many.

    All or none: if any job left submit meanwhile, this raises and the caller's holds roll back.
    """
    moved = Job.objects.filter(pk__in=[j.pk for j in jobs], stage=Stage.SUBMIT).update(stage=Stage.RENT, held_at=now)
    if moved != len(jobs):
        raise InvalidTransition(f"{len(jobs) - moved} of {len(jobs)} jobs are not waiting for compute")
    for job in jobs:
        job.stage, job.held_at = Stage.RENT, now


def mark_held(job: Job, *, now: datetime) -> None:
    mark_held_many([job], now=now)


def start_run(job: Job, *, now: datetime) -> bool:
    """rent → run: the node's worker claims the run. False when it was already claimed or cancelled."""
    claimed = Job.objects.filter(pk=job.pk, stage=Stage.RENT, attempt=job.attempt)
    if claimed.update(stage=Stage.RUN, started_at=now, cancel_requested=False) != 1:
        return False
    job.stage, job.started_at = Stage.RUN, now
    return True


def finish_run(job: Job, *, outcome: str, exit_code: int | None, reason: str, now: datetime) -> None:
    """run → output: the container is gone; outputs are collected next."""
    if outcome not in RUN_OUTCOMES | {Outcome.CANCELLED}:
        raise InvalidTransition(f"{outcome} is not an outcome of a run")
    fields = {"finished_at": now, "outcome": outcome, "exit_code": exit_code, "reason": reason}
    running = Job.objects.filter(pk=job.pk, stage=Stage.RUN, attempt=job.attempt)
    if running.update(stage=Stage.OUTPUT, **fields) != 1:
        raise InvalidTransition(f"job {job.pk} is not running")
    job.stage = Stage.OUTPUT
    for name, value in fields.items():
        setattr(job, name, value)


@transaction.atomic
def release(
    job: Job,
    *,
    outcome: str,
    reason: str,
    now: datetime,
    exit_code: int | None = None,
    meter_stop: datetime | None = None,
    usage: Usage | None = None,
    attempt: int | None = None,
) -> Job:
    """→ release: the hold ends, the meter stops, and exactly one record is written for the hold.

    1. Lock the job row, so a cancel and the worker cannot both release it.
    2. Check the move is allowed for this outcome.
       A worker passes the `attempt` it ran, so a run taken away from a lost node cannot release
       the job's next attempt.
    3. End the active hold (if any) and write its record, metered up to `meter_stop` (default now).
    4. Mark the job released, then nudge the scheduler once the transaction commits.
    """
    if outcome not in Outcome.values:
        raise InvalidTransition(f"{outcome!r} is not an outcome")
    locked = Job.objects.select_for_update().get(pk=job.pk)
    if attempt is not None and locked.attempt != attempt:
        raise InvalidTransition(f"attempt {attempt} of job {job.pk} is over (now at attempt {locked.attempt})")
    allowed = RELEASABLE_FROM.get(outcome, {Stage.RENT, Stage.RUN, Stage.OUTPUT})
    if locked.stage not in allowed:
        raise InvalidTransition(f"job {job.pk} cannot be released as {outcome} from {locked.stage}")
    hold = locked.holds.filter(released_at__isnull=True).select_related("node").first()
    if hold is not None:
        _end_hold(hold, outcome=outcome, meter_stop=min(meter_stop or now, now), usage=usage or Usage())
    fields = {"stage": Stage.RELEASE, "outcome": outcome, "reason": reason, "released_at": now}
    if exit_code is not None:
        fields["exit_code"] = exit_code
    _update(job, fields)
    if hold is not None:
        dispatch.request_schedule()
    return job


def _end_hold(hold, *, outcome: str, meter_stop: datetime, usage: Usage) -> None:
    """The hold's compute goes back to the pool and its one record is written."""
    release_hold(hold, now=meter_stop)
    write_record(hold, outcome=outcome, usage=usage)


def _update(job: Job, fields: dict) -> None:
    Job.objects.filter(pk=job.pk).update(**fields)
    for name, value in fields.items():
        setattr(job, name, value)


@transaction.atomic
def lose(job: Job, *, node_name: str, last_heartbeat: datetime, now: datetime) -> Job:
    """(rent | run | output) → the node holding the job was lost.

    The hold is released as `node_lost` with the meter stopped at the node's last heartbeat (one
    record for that attempt). With retries left (and no cancel asked for) the job goes back to the
    queue as a new attempt, which gets a hold and a record of its own; otherwise the job is released
    as node_lost. Only a job held on that node moves: a reaper that listed the job before another
    retried it must not take away the next attempt, held elsewhere.
    """
    locked = Job.objects.select_for_update().get(pk=job.pk)
    if locked.stage not in RELEASABLE_FROM[Outcome.NODE_LOST]:
        raise InvalidTransition(f"job {job.pk} is not on a node ({locked.stage})")
    hold = locked.holds.filter(released_at__isnull=True).select_related("node", "job__team").first()
    if hold is None or hold.node.name != node_name:
        raise InvalidTransition(f"job {job.pk} is not held on node {node_name}")
    reason = f"node {node_name} was lost (no heartbeat since {last_heartbeat:%Y-%m-%d %H:%M:%S} UTC)"
    if locked.cancel_requested:  # the team asked to stop it: a retry would run it again
        reason = f"{reason}; not retried: it was cancelled"
    if locked.attempt > locked.max_retries or locked.cancel_requested:
        return release(locked, outcome=Outcome.NODE_LOST, reason=reason, now=now, meter_stop=last_heartbeat)
    _end_hold(hold, outcome=Outcome.NODE_LOST, meter_stop=min(last_heartbeat, now), usage=Usage())
    fields = {
        "stage": Stage.SUBMIT, "attempt": locked.attempt + 1, "held_at": None, "started_at": None,
        "finished_at": None, "outcome": "", "exit_code": None, "cancel_requested": False,
        "reason": f"attempt {locked.attempt}: {reason}; retrying",
    }  # fmt: skip
    _update(locked, fields)
    dispatch.request_schedule()
    return locked


def reject(job: Job, *, reason: str, now: datetime) -> Job:
    """submit → release: the request can never fit the pool."""
    return release(job, outcome=Outcome.REJECTED, reason=reason, now=now)


@transaction.atomic
def cancel(job: Job, *, now: datetime) -> Job:
    """Cancel in any stage; idempotent. A running job is stopped by its node's worker."""
    locked = Job.objects.select_for_update().get(pk=job.pk)
    if locked.stage == Stage.RELEASE:
        return locked
    if locked.stage in (Stage.SUBMIT, Stage.RENT):
        reason = "cancelled before it ran" if locked.stage == Stage.RENT else "cancelled before compute was held"
        return release(locked, outcome=Outcome.CANCELLED, reason=reason, now=now)
    if not locked.cancel_requested:
        _update(locked, {"cancel_requested": True})
    return locked
