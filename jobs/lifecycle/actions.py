"""The actions that change a job, one function per change, called by pages, the API, the node, the
reaper and the admin alike. Each moves the job by the table in jobs.transitions, with a conditional
update or under its row lock, so a second delivery or a racing event changes it at most once."""

import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounting.budget_warnings import note_crossings
from accounting.budgets import lock_team
from accounting.meter import Held, Usage, write_record
from accounting.rates import meter_stop_bound
from jobs.lifecycle import chains, excerpts, retries, worst_case
from jobs.lifecycle.history import PLATFORM, SCHEDULER, Actor, Moved, record, record_many
from jobs.lifecycle.isolation_levels import strong_required_by
from jobs.models import Isolation, Job, JobArray, Outcome, OutputFile, Stage
from jobs.scheduling import queue
from jobs.scheduling.dispatch import dispatch_run, request_schedule, request_schedule_at
from jobs.signals import job_released
from jobs.storage import logs, quotas
from jobs.storage.store import delete_outputs
from jobs.transitions import TRANSITIONS, Event, InvalidTransition, next_stage, stages_taking, target_of
from pool.models import Hold
from pool.nodes import hold_many, pool_nodes, release_hold
from pool.placement import reasons
from pool.placement.backfill import place
from pool.placement.types import Placement
from pool.preemption import Preemption, choose, not_preemptable
from pool.scheduler import (
    Queues,
    fair_share_order,
    free_on,
    lock_pool,
    running_holds,
    split_impossible,
    unreleased_holds,
    windows_ahead,
)

LEFT_QUEUE = {"queue_position": None, "wait_reason": "", "expected_start": None}
PASS_LIMIT = 2000  # holds one scheduler pass makes at most
SETTLE_ROUNDS = 20  # a pass follows a chain of cancelled dependents this many links deep; the next goes on
REFUSED_IN_REASON = 20  # refused outputs named in a job's reason; its log names them all

log = logging.getLogger(__name__)


@transaction.atomic
def schedule_pass(*, now: datetime | None = None, limit: int = PASS_LIMIT) -> list[Hold]:
    """One scheduler pass: submit → rent for every waiting job the pool has room for. Returns the holds.

    1. Take the pool (pool.scheduler.lock_pool): one pass at a time, the nodes taking work read (their rows
       not locked: heartbeats never wait); settle what the releases since the last pass let go or doomed
       (jobs.lifecycle.chains).
    2. Read the queue in fair-share order; reject the jobs no registered node could ever hold.
    3. Place the rest (pool.placement.backfill.place); a job that cannot start gets a reservation.
    4. Lock the chosen job rows (skipping any a cancel holds), hold them all and move them to RENT.
    5. Preempt for the jobs of preempting queues left for want of room (pool.preemption, preempt()).
    6. Store where each waiting job stands and why; queue the runs once all this commits.
    """
    nodes = lock_pool(now=now)
    settle_chains(now=now or timezone.now())
    unreleased = unreleased_holds(nodes)
    # Read after the holds, so no hold starts before the release of the cores it takes.
    now = now or timezone.now()
    queues = Queues.read()
    running = running_holds(nodes, queues, now=now, held=unreleased)
    free = free_on(nodes, running)
    waiting, stored = queue.waiting(now=now, queues=queues)
    possible, impossible = split_impossible(fair_share_order(waiting, now=now))
    # In id order: two passes that rank teams differently must not lock the same rows crosswise.
    for w, why in sorted(impossible, key=lambda pair: str(pair[0].job_id)):
        try:
            reject(Job.objects.get(pk=w.job_id), reason=f"can never be held: {reasons.reason_text(why)}", now=now)
        except InvalidTransition:
            pass
    windows = windows_ahead(nodes, now=now)
    plan = place(
        possible, nodes, free, running=running, now=now, limit=limit, windows=windows, caps=queues.caps(),
    )  # fmt: skip
    chosen = [p.job_id for p in plan.placements]
    lockable = Job.objects.select_for_update(skip_locked=True).waiting().filter(pk__in=chosen)
    ours = set(lockable.values_list("pk", flat=True))
    placed = [p for p in plan.placements if p.job_id in ours]
    holds = hold(placed, now=now)
    # Only a job of a preempting queue, left waiting, preempts or waits for the jobs it preempted.
    stopping = _stopping() if any(left.waiting.preempts for left in plan.left) else {}
    preemptions = choose(
        plan.left, nodes, free, placements=placed, running=running, stopping=stopping, now=now, windows=windows,
        grace=timedelta(seconds=settings.E31_PREEMPT_GRACE_S),
    )  # fmt: skip
    waits_for = preempt(preemptions, queues=queues, now=now)
    for victim, by in stopping.items():
        if by is not None:
            waits_for.setdefault(by, []).append(victim)
    left_waiting = [
        replace(s, reason=reasons.waiting_for_preempted(waits_for[s.waiting.job_id])) if s.waiting.job_id in waits_for
        else s
        for s in queue.left_waiting(plan.left, now=now)
    ]  # fmt: skip
    queue.store_positions(left_waiting, stored)
    for held in holds:
        # robust: one failed send (the broker down) must not drop the runs queued after it.
        transaction.on_commit(partial(dispatch_run, str(held.job_id), held.node.queue), robust=True)
    return holds


def _stopping() -> dict[uuid.UUID, uuid.UUID | None]:
    """The held jobs already asked to stop: by id, the job each was preempted for (None: it was cancelled)."""
    asked = Job.objects.held().filter(Q(preempted_by__isnull=False) | Q(cancel_requested=True))
    return dict(asked.values_list("pk", "preempted_by_id"))


def preempt(preemptions: Sequence[Preemption], *, queues: Queues, now: datetime) -> dict[uuid.UUID, list[uuid.UUID]]:
    """Set `preempted_by` on the chosen running jobs (their runs notice it as a cancel), an event on both sides;
    rows locked elsewhere are skipped. Returns, by preemptor, the jobs it now waits for."""
    asked: dict[uuid.UUID, list[uuid.UUID]] = {}
    for chosen in preemptions:
        preemptor = (
            Job.objects.select_for_update(skip_locked=True).select_related("team")
            .waiting().filter(pk=chosen.job_id, cancel_requested=False).first()
        )  # fmt: skip
        if preemptor is None:
            continue
        victims = (
            Job.objects.select_for_update(skip_locked=True).select_related("team")
            .filter(pk__in=chosen.victims, stage__in=[Stage.RENT, Stage.RUN], preempted_by__isnull=True,
                    cancel_requested=False).order_by("pk")
        )  # fmt: skip
        for victim in victims:
            _update(victim, {"preempted_by": preemptor})
            on = chosen.node.name
            said = f"preempted by job {preemptor.pk} ({_policy_of(preemptor, queues, seen_by=victim)}) on node {on}"
            record(victim, Event.PREEMPT, stage=victim.stage, actor=SCHEDULER, at=now, reason=said)
            said = f"preempting job {victim.pk} ({_policy_of(victim, queues, seen_by=preemptor)}) on node {on}"
            record(preemptor, Event.PREEMPT, stage=preemptor.stage, actor=SCHEDULER, at=now, reason=said)
            asked.setdefault(preemptor.pk, []).append(victim.pk)
    return asked


def _policy_of(job: Job, queues: Queues, *, seen_by: Job) -> str:
    """E.g. "queue urgent, team red"; the event is `seen_by`'s, read by its team: another team goes unnamed."""
    policy = queues.of(job.queue_id)
    team = f"team {job.team.slug}" if job.team_id == seen_by.team_id else "another team"
    return f"queue {policy.name if policy else 'none'}, {team}"


def settle_chains(*, now: datetime) -> int:
    """Apply chains.settle, cancelling the doomed dependents and stopping arrays, up to SETTLE_ROUNDS links deep;
    returns how many were let go. Called by the pass, under its pool lock."""
    let_go = 0
    for _ in range(SETTLE_ROUNDS):
        settled = chains.settle(now=now)
        let_go += settled.let_go
        for array, reason in settled.stopped_arrays:
            stop_array(array, reason=reason, now=now)
        for job_id, reason in settled.doomed_jobs:
            locked = Job.objects.select_for_update().get(pk=job_id)
            if locked.stage == Stage.SUBMIT:
                _release(locked, Event.CANCEL, outcome=Outcome.CANCELLED, reason=reason, now=now, actor=SCHEDULER)
        if not (settled.stopped_arrays or settled.doomed_jobs):
            break
    return let_go


@transaction.atomic
def stop_array(array: JobArray, *, reason: str, now: datetime, acting_user: User | None = None) -> int:
    """Cancel every task not released yet: those waiting in one statement, the rest as cancel() does. Returns how
    many were cancelled or asked to stop."""
    JobArray.objects.filter(pk=array.pk, stopped_at__isnull=True).update(stopped_at=now, stop_reason=reason)
    array.stopped_at, array.stop_reason = array.stopped_at or now, array.stop_reason or reason
    actor = Actor.person(acting_user) if acting_user is not None else SCHEDULER
    waiting = Job.objects.select_for_update().waiting().filter(array=array)
    moved = [Moved(pk, attempt, reason) for pk, attempt in waiting.values_list("pk", "attempt")]
    fields = {
        "stage": Stage.RELEASE, "outcome": Outcome.CANCELLED, "reason": reason, "released_at": now,
        "held_back": False, "not_before": None, **LEFT_QUEUE,
        **({"cancelled_by": acting_user} if acting_user is not None else {}),
    }  # fmt: skip
    Job.objects.waiting().filter(pk__in=[m.job_id for m in moved]).update(**fields)
    record_many(moved, Event.CANCEL, stage=Stage.RELEASE, outcome=Outcome.CANCELLED, actor=actor, at=now)
    live = list(Job.objects.live().filter(array=array).order_by("array_index"))
    for task in live:
        cancel(task, now=now, acting_user=acting_user)
    chains.touch_array(array)
    request_schedule()
    return len(moved) + len(live)


@transaction.atomic
def hold(placements: list[Placement], *, now: datetime) -> list[Hold]:
    """submit → rent: hold the placed compute (pool.nodes.hold_many) and start each job's meter, all or none."""
    if placements:
        moved = [Moved(p.job_id, p.attempt, f"on node {p.node.name}") for p in placements]
        _move_many(moved, Event.HOLD, {"held_at": now, **LEFT_QUEUE}, actor=SCHEDULER, now=now)
    return hold_many(placements, now=now)


def _move_many(jobs: list[Moved], event: str, fields: dict[str, Any], *, actor: Actor, now: datetime) -> None:
    """Move jobs by `event`, all or none: if any left the stages it takes, the caller's transaction rolls back."""
    job_ids = [m.job_id for m in jobs]
    moved = Job.objects.filter(pk__in=job_ids, stage__in=stages_taking(event)).update(stage=target_of(event), **fields)
    if moved != len(job_ids):
        raise InvalidTransition(f"{len(job_ids) - moved} of {len(job_ids)} jobs cannot take the event {event}")
    record_many(jobs, event, stage=target_of(event), actor=actor, at=now)


def _move(job: Job, event: str, fields: dict[str, Any], *, now: datetime, reason: str = "", node: str = "") -> bool:
    """Move one job by `event` if this attempt is still at a stage the event takes; `node` (else the hold's) acts."""
    moving = Job.objects.filter(pk=job.pk, stage__in=stages_taking(event), attempt=job.attempt)
    if moving.update(stage=target_of(event), **fields) != 1:
        return False
    _assign(job, {"stage": target_of(event), **fields})
    actor = Actor.node(node) if node else _node_of(job)
    record(job, event, stage=job.stage, outcome=job.outcome, actor=actor, at=now, reason=reason)
    return True


def _node_of(job: Job) -> Actor:
    holds = Hold.objects.filter(job_id=job.pk, attempt=job.attempt).order_by("-held_at")
    name = holds.values_list("node__name", flat=True).first()
    return Actor.node(name) if name else PLATFORM


@transaction.atomic
def settle_isolation(job: Job, *, now: datetime, strong_runtime: str, node_runtimes: Collection[str]) -> bool:
    """At RENT: an operator may have required isolation=strong since the submit; the job becomes strong, and is
    rejected (False) when its node lacks `strong_runtime`."""
    locked = _lock(job, related=("team", "image"))
    if locked.stage != Stage.RENT or locked.attempt != job.attempt:
        return True
    required = strong_required_by(locked.team, locked.image)
    if required and locked.isolation != Isolation.STRONG:
        _update(locked, {"isolation": Isolation.STRONG})
        logs.append_line(locked.pk, f"isolation=strong: {required} requires it (set after the job was submitted)")
    rejected = locked.isolation == Isolation.STRONG and strong_runtime not in node_runtimes
    if rejected:
        hold = locked.active_hold
        where = f"node {hold.node.name}" if hold is not None else "its node"
        reason = f"{required or 'the job'} requires isolation=strong, and {where} has no {strong_runtime} runtime"
        _release(locked, Event.REJECT, outcome=Outcome.REJECTED, reason=f"{reason} to run it with", now=now)
    _refresh(job, from_row=locked)
    return not rejected


@transaction.atomic
def start_run(job: Job, *, now: datetime, runtime: str = "", node: str = "") -> bool:
    """rent → run: the node claims the run, naming its runtime (kept on the hold); False when already claimed or
    cancelled. An earlier attempt's live use goes: this run's samples replace it."""
    fields = {"started_at": now, "cancel_requested": False, "usage_now": None}
    if not _move(job, Event.START, fields, now=now, reason=runtime and f"run by {runtime}", node=node):
        return False
    if runtime:
        Hold.objects.filter(job=job, attempt=job.attempt, released_at__isnull=True).update(runtime=runtime)
    return True


@transaction.atomic
def finish_run(
    job: Job, *, outcome: str, exit_code: int | None, reason: str, now: datetime, node: str = ""
) -> None:  # fmt: skip
    """run → output: the container is gone, and its live use with it; outputs are collected next."""
    next_stage(job.stage, Event.FINISH, outcome=outcome)
    fields = {"finished_at": now, "outcome": outcome, "exit_code": exit_code, "reason": reason, "usage_now": None}
    if not _move(job, Event.FINISH, fields, now=now, reason=reason, node=node):
        raise InvalidTransition(f"job {job.pk} is not running (attempt {job.attempt})")


@dataclass
class FoundOutputs:
    """What the node read of a job's /output: the outputs to keep, and its words on the rest."""

    rows: list[OutputFile] = field(default_factory=list)  # not saved yet
    refused: list[str] = field(default_factory=list)  # "path (why)"
    notes: list[str] = field(default_factory=list)  # for the reason and the log
    log_only: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # each fails a run that succeeded


@dataclass
class CopyShortfall:
    """What the node's copy of the kept outputs into the store fell short of (empty: it stored them all)."""

    not_stored: list[str] = field(default_factory=list)  # paths of kept outputs
    refused: list[str] = field(default_factory=list)
    failure: str = ""  # why the copy stopped short


def collect_outputs(
    job: Job, *, outcome: str, reason: str, found: FoundOutputs, copy: Callable[[], CopyShortfall], now: datetime
) -> tuple[str, str, list[str]]:
    """The OUTPUT step around the node's copy of the files; returns the outcome, reason and log notes to release with.

    1. Keep the rows within the team's store quota, committed so no lock is held during the copy; over it,
       keep none and drop what an earlier collection copied.
    2. The node copies the kept files into the store (`copy`).
    3. Drop the rows of files not stored, fail a succeeded run on a failure, name the refused outputs.
    """
    with transaction.atomic():
        # The job's row before the team's, as release_lost takes them: a retry cannot slip in between.
        _at_output(job, lock=True)
        over_quota = quotas.keep_outputs(job, found.rows, now=now)
    if over_quota is not None:
        delete_outputs(job.pk)
        copied = CopyShortfall(failure=str(over_quota))
    else:
        copied = copy()
    with transaction.atomic():
        _at_output(job)
        if copied.not_stored:
            OutputFile.objects.filter(job=job, path__in=copied.not_stored).delete()
        failures = [failure for failure in [*found.failures, copied.failure] if failure]
        if failures and outcome == Outcome.SUCCEEDED:
            outcome = Outcome.FAILED
        refused = [*found.refused, *copied.refused]
        log_notes = reason_notes = [*found.notes, *failures]
        if refused:
            named = ", ".join(refused[:REFUSED_IN_REASON])
            if len(refused) > REFUSED_IN_REASON:
                named += f" and {len(refused) - REFUSED_IN_REASON} more, named in the log"
            reason_notes = [f"refused outputs: {named}", *reason_notes]
            log_notes = [f"refused outputs: {', '.join(refused)}", *log_notes]
    return outcome, "; ".join(part for part in [reason, *reason_notes] if part), [*log_notes, *found.log_only]


def _at_output(job: Job, *, lock: bool = False) -> None:
    at_output = Job.objects.filter(pk=job.pk, attempt=job.attempt, stage=Stage.OUTPUT)
    if not (at_output.select_for_update() if lock else at_output).values_list("pk", flat=True):
        raise InvalidTransition(f"job {job.pk} is not collecting its outputs (attempt {job.attempt})")


@transaction.atomic
def release(
    job: Job, *, outcome: str, reason: str, now: datetime, exit_code: int | None = None, usage: Usage | None = None,
    attempt: int | None = None, meter_stop: datetime | None = None, log_notes: Sequence[str] = (),
) -> Job:  # fmt: skip
    """output → release: the hold ends with its one record, and the log is sealed with `log_notes` (its
    failure excerpt read from the sealed log's tail, notes included). A node passes the `attempt` it ran,
    so a run taken away from a lost node cannot release (or seal the log of) the job's next attempt."""
    locked = _lock(job, attempt=attempt, related=("image",))  # its record names the image
    code = exit_code if exit_code is not None else locked.exit_code
    attempt_outcome = outcome  # its record's: how the attempt ended, which its team may not pay for
    preempted = outcome == Outcome.PREEMPTED and not locked.cancel_requested
    if outcome == Outcome.PREEMPTED and locked.cancel_requested:
        # Its team's word comes first: not requeued, the job ends cancelled. The platform still stopped the
        # attempt for another job, so its record says preempted (not charged), and its history both.
        outcome = Outcome.CANCELLED
        reason = f"cancelled while being preempted ({reason}); the preempted attempt is not charged"
    if preempted or retries.wanted(locked, outcome=outcome, exit_code=code):
        for note in log_notes:
            logs.append_line(locked.pk, note)
        ended = Ended(outcome, code, reason, meter_stop or now, usage or Usage())
        reason = _retry(locked, ended, actor=_node_of(locked), now=now, preempted=preempted)
        if locked.stage == Stage.SUBMIT:  # a preempted attempt always is
            return _refresh(job, from_row=locked)
        log_notes = ()  # written above
    _seal(locked, log_notes)  # before the record locks the ledger, which every release waits for
    _release(
        locked, Event.COLLECT, outcome=outcome, reason=reason, now=now, exit_code=exit_code, usage=usage,
        meter_stop=meter_stop, attempt_outcome=attempt_outcome,
    )  # fmt: skip
    return _refresh(job, from_row=locked)


@dataclass(frozen=True)
class Ended:
    """How an attempt ended, as its record and the attempts it is kept among say."""

    outcome: str
    exit_code: int | None
    reason: str
    meter_stop: datetime
    usage: Usage


def _retry(locked: Job, ended: Ended, *, actor: Actor, now: datetime, preempted: bool = False) -> str:
    """End the attempt's hold and requeue the job as its next attempt; when its team's budget cannot take
    another, the reason to release it with instead. A `preempted` attempt is requeued whatever the budget (the
    platform stopped it), with no delay and as much memory, and keeps its outputs so far (a checkpoint)."""
    # The team's row before the ledger's (taken by the record): waiting for a team's row while holding
    # the ledger, which every release takes, would make all releases wait on one team's submissions.
    lock_team(locked.team)
    hold = locked.active_hold
    if hold is not None:
        _end_hold(
            locked, hold, outcome=ended.outcome, meter_stop=ended.meter_stop, usage=ended.usage,
            exit_code=ended.exit_code,
        )  # fmt: skip
    if not preempted and (past := _retry_past_budget(locked, now=now)):
        request_schedule()  # its hold has ended: the release that follows has none to end
        return f"{ended.reason}; not retried: {past}"
    memory_mb, not_before = locked.memory_mb, None
    if not preempted:
        largest = max((n.memory_mb for n in pool_nodes()), default=locked.memory_mb)
        memory_mb = retries.next_memory_mb(locked, outcome=ended.outcome, largest_mb=largest)
        not_before = retries.not_before(locked, now=now)
    kept = retries.ended(
        locked, outcome=ended.outcome, exit_code=ended.exit_code, reason=ended.reason,
        memory_mb=hold.memory_mb if hold is not None else locked.memory_mb,
        held_at=hold.held_at if hold is not None else locked.held_at,
        released_at=hold.released_at if hold is not None else now,
    )  # fmt: skip
    said = f"attempt {locked.attempt}: {ended.reason or 'ended ' + ended.outcome}"
    retrying = "; retrying" + (f" with {memory_mb} MB" if memory_mb != locked.memory_mb else "")
    retrying += f" not before {not_before:%H:%M:%S} UTC" if not_before is not None else ""
    if preempted:
        retrying = "; requeued in its place, its outputs so far kept"
        # The cap alone is asked: the job was otherwise preemptable when the pass chose it.
        if why := not_preemptable(declared=True, queue=None, preemptions=locked.preemptions + 1):
            retrying += f"; not preempted again: {why}"
    # One log across attempts; a failed attempt's outputs are not the job's: the next one collects its own.
    logs.unseal(locked.pk)
    logs.append_line(locked.pk, said + retrying)
    if not preempted:
        OutputFile.objects.filter(job=locked).delete()
        transaction.on_commit(partial(delete_outputs, locked.pk))
    fields = {
        "stage": next_stage(locked.stage, Event.RETRY), "attempt": locked.attempt + 1, "held_at": None,
        "started_at": None, "finished_at": None, "outcome": "", "exit_code": None, "cancel_requested": False,
        "reason": said + retrying, "memory_mb": memory_mb, "not_before": not_before, "usage_now": None,
        "past_attempts": [*locked.past_attempts, kept], **LEFT_QUEUE,
        "preemptions": locked.preemptions + preempted, "preempted_by": None,
        "wait_reason": f"attempt {locked.attempt + 1} waits for its retry delay" if not_before is not None else "",
    }  # fmt: skip
    # The retry's event belongs to the attempt it ends: how that attempt ended, and why.
    record(locked, Event.RETRY, stage=Stage.SUBMIT, outcome=ended.outcome, actor=actor, at=now, reason=said + retrying)
    _update(locked, fields)
    request_schedule()
    if not_before is not None:
        request_schedule_at(not_before)
    return ended.reason


def _seal(job: Job, notes: Sequence[str]) -> None:
    """Seal the log under the row lock, so a released job's log is whole; a store that fails leaves it
    live in the database rather than keep the job from its release."""
    try:
        with transaction.atomic():
            logs.seal(job.pk, notes=notes)
    except Exception:
        log.exception("sealing the log of job %s failed: it stays in the database", job.pk)


@transaction.atomic
def reject(job: Job, *, reason: str, now: datetime) -> Job:
    """submit → release: the request can never fit the pool."""
    locked = _lock(job)
    if locked.stage != Stage.SUBMIT:
        raise InvalidTransition(f"only a waiting job is rejected as never fitting (job {job.pk} is at {locked.stage})")
    locked = _release(locked, Event.REJECT, outcome=Outcome.REJECTED, reason=reason, now=now, actor=SCHEDULER)
    return _refresh(job, from_row=locked)


@transaction.atomic
def cancel(job: Job, *, now: datetime, acting_user: User | None = None) -> Job:
    """Cancel in any stage; idempotent. A job not running yet is released at once; a running one is
    stopped by its node, which sees `cancel_requested`."""
    locked = _lock(job)
    who = {"cancelled_by": acting_user} if acting_user is not None else {}
    actor = Actor.person(acting_user) if acting_user is not None else PLATFORM
    if (locked.stage, Event.CANCEL) in TRANSITIONS:
        reason = "cancelled before it ran" if locked.stage == Stage.RENT else "cancelled before compute was held"
        _release(locked, Event.CANCEL, outcome=Outcome.CANCELLED, reason=reason, now=now, extra=who, actor=actor)
    elif locked.stage != Stage.RELEASE and not locked.cancel_requested:
        _update(locked, {"cancel_requested": True, **who})
        # Not a move, but who asked is history: the finish names only the node.
        record(locked, Event.CANCEL, stage=locked.stage, actor=actor, at=now, reason="cancel asked")
    return _refresh(job, from_row=locked)


@transaction.atomic
def release_lost(
    job: Job, *, node_name: str, last_heartbeat: datetime, now: datetime, actor: Actor, reason: str = "",
    usage: Usage | None = None,
) -> Job:  # fmt: skip
    """(rent | run | output) → its node was lost, as `actor` found: the hold ends metered to `last_heartbeat`
    and the job is retried or released. Only a job still held on that node moves, so a late reaper cannot take
    a next attempt elsewhere. `reason` and `usage`: when the node itself still knows them."""
    locked = _lock(job)
    hold = locked.active_hold
    if hold is None or hold.node.name != node_name:
        raise InvalidTransition(f"job {job.pk} is not held on node {node_name}")
    next_stage(locked.stage, Event.LOSE)
    reason = reason or f"node {node_name} was lost (no heartbeat since {last_heartbeat:%Y-%m-%d %H:%M:%S} UTC)"
    if locked.cancel_requested:  # the team asked to stop it: a retry would run it again
        reason = f"{reason}; not retried: it was cancelled"
    elif (preempted := locked.preempted_by_id is not None) or retries.wanted(
        locked, outcome=Outcome.NODE_LOST, exit_code=None
    ):
        # Being preempted, it was to go back to the queue in its place anyway: its node's loss counts no more.
        ended = Ended(Outcome.NODE_LOST, None, reason, min(last_heartbeat, now), usage or Usage())
        reason = _retry(locked, ended, actor=actor, now=now, preempted=preempted)
        if locked.stage == Stage.SUBMIT:
            return _refresh(job, from_row=locked)
    _release(
        locked, Event.LOSE, outcome=Outcome.NODE_LOST, reason=reason, now=now, meter_stop=last_heartbeat,
        usage=usage, actor=actor,
    )  # fmt: skip
    # What reached the database is its log; robust: a store that fails must not stop the reaper's loop.
    transaction.on_commit(partial(logs.seal, locked.pk), robust=True)
    return _refresh(job, from_row=locked)


def _retry_past_budget(job: Job, *, now: datetime) -> str:
    """Why another attempt could take the team past its budget ("" when it fits); the caller holds the team's lock."""
    found = worst_case.standing(job.team, now=now)
    if found is None or found.used <= found.limit:
        return ""
    return f"another attempt could take team {found.team} past its budget of {found.amount(found.limit)}"


def _lock(job: Job, *, attempt: int | None = None, related: tuple[str, ...] = ()) -> Job:
    """The job's row, locked and read afresh (a copy: the caller's object changes only if it moves)."""
    locked = Job.objects.select_related(*related).select_for_update(of=("self",)).get(pk=job.pk)
    if attempt is not None and locked.attempt != attempt:
        raise InvalidTransition(f"attempt {attempt} of job {job.pk} is over (now at attempt {locked.attempt})")
    return locked


def _refresh(job: Job, *, from_row: Job) -> Job:
    """Bring the caller's object up to date with the row as the action left it (`from_row`, read locked)."""
    for column in Job._meta.concrete_fields:
        setattr(job, column.attname, getattr(from_row, column.attname))
    return job


def _release(
    locked: Job, event: str, *, outcome: str, reason: str, now: datetime, exit_code: int | None = None,
    meter_stop: datetime | None = None, usage: Usage | None = None, extra: dict[str, Any] | None = None,
    actor: Actor | None = None, attempt_outcome: str = "",
) -> Job:  # fmt: skip
    """→ release, under the job's row lock: the hold ends with its one record, metered to `meter_stop`; a job
    that did not succeed keeps the excerpt of its log as it is now. Every way to an ending passes here."""
    to = next_stage(locked.stage, event, outcome=outcome)
    excerpt = _excerpt(locked, outcome)  # read before the record locks the ledger, which every release waits for
    hold = locked.active_hold
    if hold is not None:
        meter_stop = min(meter_stop or now, now)
        code = exit_code if exit_code is not None else locked.exit_code
        _end_hold(
            locked, hold, outcome=attempt_outcome or outcome, meter_stop=meter_stop, usage=usage or Usage(),
            exit_code=code,
        )  # fmt: skip
    fields: dict[str, Any] = {
        "stage": to, "outcome": outcome, "reason": reason, "released_at": now, **LEFT_QUEUE, **(extra or {}),
        "failure_excerpt": excerpt, "usage_now": None, "held_back": False, "not_before": None,
        "preempted_by": None,  # a preemption it ended before (a cancel, its own end) stops it no more
    }  # fmt: skip
    if exit_code is not None:
        fields["exit_code"] = exit_code
    _update(locked, fields)
    actor = actor or (Actor.node(hold.node.name) if hold else _node_of(locked))
    record(locked, event, stage=to, outcome=outcome, actor=actor, at=now, reason=reason)
    job_released.send(sender=Job, job=locked)
    if chains.touch(locked) or hold is not None:  # what it held, or what waits on it, is the next pass's
        request_schedule()
    return locked


def _excerpt(job: Job, outcome: str) -> str:
    """A job that never started has no log to read: its reason alone says why it ended."""
    return excerpts.safely_of_log(job.pk) if job.started_at and excerpts.kept_for(outcome) else ""


def _end_hold(
    job: Job, hold: Hold, *, outcome: str, meter_stop: datetime, usage: Usage, exit_code: int | None = None
) -> None:
    """The hold's compute goes back to the pool with its one record, never metered past the hold's
    bound: the job's worst case at admission counted no more, so a later end is the platform's."""
    release_hold(hold, now=min(meter_stop, meter_stop_bound(hold.held_at, job.time_limit_s)))
    assert hold.released_at is not None
    held = Held(
        hold_id=hold.pk, job_id=job.pk, team_id=job.team_id, node=hold.node.name,
        cpu_set=list(hold.cpu_set), memory_mb=hold.memory_mb, gpu_ids=list(hold.gpu_ids),
        held_at=hold.held_at, released_at=hold.released_at, attempt=hold.attempt,
        image=job.image.name,
    )  # fmt: skip
    write_record(held, outcome=outcome, usage=usage, exit_code=exit_code)
    # Every record passes here (a release's, a retried attempt's): each may take the team past 80 or 100%.
    note_crossings(job.team_id, now=hold.released_at)


def _update(job: Job, fields: dict[str, Any]) -> None:
    Job.objects.filter(pk=job.pk).update(**fields)
    _assign(job, fields)


def _assign(job: Job, fields: dict[str, Any]) -> None:
    for name, value in fields.items():
        setattr(job, name, value)
