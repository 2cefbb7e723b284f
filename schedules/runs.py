"""The due pass: each planned time of a due schedule recorded once, as a run submitted, skipped, missed or refused.

Exactly once: a planned time is one ScheduleRun row (unique schedule and planned time), inserted in the
transaction that submits its job, so a crash leaves neither and a second pass can never add another. Passes
split the due schedules between them: each takes a schedule's row lock, skipping those another pass holds,
and advances its next_run_at in the same transaction.

Bounded: a pass records at most E31_SCHEDULES_PER_PASS schedules, taken from each team in turn, in one
process, and takes no schedule more once it has run for a third of E31_SCHEDULES_EVERY_S (a slow database:
the passes beat sends never overlap); a minute with more due leaves the rest to the next passes, so the pass's
cost per minute has a bound whatever the number of schedules. A team's runs past
E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE in one planned minute are recorded refused (schedules.caps).

Late runs (the pool or beat was down, or the passes behind): of the planned times a pass finds overdue,
those later than the schedule's starting_deadline_s are missed; of the rest (all of them with no deadline)
only the latest is submitted and the others are missed as superseded by it, so a schedule submits at most
one late run when service returns. A long outage records its last few missed times one by one and one row
more for all those before them, never one row per minute of a week.
"""

import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from time import monotonic
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Window
from django.db.models.functions import RowNumber

from core.refusals import Refused
from jobs.lifecycle import actions
from jobs.models import Job, JobArray, Stage
from jobs.submit.arrays import cancel_array
from schedules import cron
from schedules.caps import RunsPerMinute
from schedules.models import Concurrency, RunStatus, Schedule, ScheduleEvent, ScheduleRun
from schedules.signals import run_not_submitted
from schedules.submitting import submit_run

log = logging.getLogger(__name__)

# Schedules recorded in one transaction (on PostgreSQL: chunk_size).
CHUNK = 50
# The part of the interval between two passes a pass may take before it stops taking schedules.
PASS_SHARE = 1 / 3
# How long a run the platform fails to submit is taken again before it is recorded refused.
PLATFORM_RETRY = timedelta(minutes=2)
# Missed times a pass records one by one, the latest ones; the earlier ones of the same outage are one row.
MISSED_ROWS = 5


def first_planned(schedule: Schedule, *, now: datetime) -> datetime:
    """The schedule's next planned instant after `now` (UTC): its next_run_at once created, resumed or replanned."""
    return next(cron.planned_after(schedule.cron, ZoneInfo(schedule.time_zone), now))


def due_pass(*, now: datetime) -> int:
    """Record the planned times up to `now` of at most E31_SCHEDULES_PER_PASS due schedules, for at most a third
    of E31_SCHEDULES_EVERY_S; the number of runs recorded. The others wait for the next passes, their planned
    times kept: a run recorded later is still its planned time's (missed once later than its
    starting_deadline_s, as any late run)."""
    ids = due_ids(now=now, most=settings.E31_SCHEDULES_PER_PASS)
    return record_due(ids, now=now, for_s=settings.E31_SCHEDULES_EVERY_S * PASS_SHARE)


def due_ids(*, now: datetime, most: int) -> list[int]:
    """At most `most` of the schedules with a planned time not yet recorded at `now`, taken from each team in
    turn (a team's most overdue first): a team with a thousand due waits for its own, not every other team."""
    turn = Window(RowNumber(), partition_by=[F("team_id")], order_by=[F("next_run_at").asc(), F("pk").asc()])
    due = Schedule.objects.filter(paused=False, next_run_at__lte=now).annotate(turn=turn)
    return list(due.order_by("turn", "next_run_at", "pk").values_list("pk", flat=True)[:most])


def record_due(schedule_ids: Iterable[int], *, now: datetime, for_s: float | None = None) -> int:
    """Record the planned times up to `now` of each of these schedules still due; those another pass is
    recording are left to it, and with `for_s` those not reached within that many seconds (a schedule begun
    is finished). On PostgreSQL a few dozen schedules share a transaction (and its commit and its update of
    next_run_at; on SQLite one each: chunk_size), each run in a savepoint of its own: one failing is logged
    and stops no other."""
    ids, recorded, size = list(schedule_ids), 0, chunk_size()
    until = None if for_s is None else monotonic() + for_s
    for start in range(0, len(ids), size):
        if until is not None and monotonic() > until:
            break
        recorded += _record_some(ids[start : start + size], now=now, until=until)
    return recorded


def chunk_size() -> int:
    """The schedules recorded in one transaction: CHUNK on PostgreSQL, whose row locks let other writers on,
    so a chunk saves commits; one on SQLite (make run), whose write lock is the whole database's: a chunk
    would keep every other writer (a submission, the scheduler pass) waiting for all its schedules."""
    return 1 if connection.vendor == "sqlite" else CHUNK


@dataclass(frozen=True)
class Planned:
    """A planned time of one pass and what becomes of it: `submit`, or missed with the reason; `retried` False
    for a run asked for now, which no later pass takes again."""

    at: datetime
    submit: bool = False
    missed: str = ""
    retried: bool = True


@transaction.atomic
def _record_some(ids: list[int], *, now: datetime, until: float | None = None) -> int:
    # Those another pass holds are skipped, not waited for: two passes split the due schedules between them.
    # By team: a submission to a team with a budget locks the team's row until this transaction ends, so
    # passes running at once take those locks in one order and never deadlock.
    due = (
        Schedule.objects.select_for_update(skip_locked=True, of=("self",))
        .select_related("team", "created_by", "runner", "template__image", "template__team")
        .filter(pk__in=ids, paused=False, next_run_at__lte=now)
        .order_by("team_id", "next_run_at", "pk")
    )
    recorded, advanced, per_minute = 0, [], RunsPerMinute()
    for schedule in due:
        if until is not None and monotonic() > until:
            break  # the others are not advanced: still due, the next pass's
        try:
            planned, after = plan(schedule, now=now)
            for time in planned:
                recorded += _record_run(schedule, time, now=now, per_minute=per_minute)
        except cron.BadCron as exc:
            recorded += _refuse_line(schedule, exc, now=now)
            continue
        except Exception:  # a receiver failing, a zone gone: no other schedule waits for it
            # Each run is a savepoint: those recorded stay, the failed one is undone. Not advanced, the
            # schedule is taken again by the next pass, which skips the times it has rows for.
            log.exception("could not record the due runs of schedule %s", schedule.pk)
            continue
        schedule.next_run_at = after
        advanced.append(schedule)
    Schedule.objects.bulk_update(advanced, ["next_run_at"])
    return recorded


def plan(schedule: Schedule, *, now: datetime) -> tuple[list[Planned], datetime]:
    """The schedule's planned times from its next_run_at up to `now`, each with what becomes of it, and
    its first planned time after `now`.

    1. Every overdue time is walked, but only the first, the last MISSED_ROWS missed and the latest one
       within the deadline are kept: an outage of a week of minutes is a handful of rows.
    2. A time later than starting_deadline_s is missed; the latest within it is submitted, any other one
       within it is missed as superseded by it.
    """
    zone = ZoneInfo(schedule.time_zone)
    assert schedule.next_run_at is not None
    deadline = None if schedule.starting_deadline_s is None else timedelta(seconds=schedule.starting_deadline_s)
    times = cron.planned_after(schedule.cron, zone, schedule.next_run_at)
    first, count, latest = schedule.next_run_at, 0, deque[datetime](maxlen=MISSED_ROWS + 1)
    dropped = at = first
    while at <= now:
        count += 1
        if len(latest) == latest.maxlen:
            dropped = latest[0]
        latest.append(at)
        at = next(times)
    kept = list(latest)
    submitted = kept[-1] if deadline is None or now - kept[-1] <= deadline else None
    result: list[Planned] = []
    if count > len(kept):  # the first of an outage stands for those not kept
        result.append(Planned(first, missed=_outage_words(count - len(kept), first, dropped, zone)))
    for time in kept:
        if time == submitted:
            result.append(Planned(time, submit=True))
        elif deadline is not None and now - time > deadline:
            result.append(Planned(time, missed=_late_words(now - time, deadline)))
        else:
            assert submitted is not None
            result.append(Planned(time, missed=f"Missed: superseded by the run of {_local(submitted, zone)}, "
                                                "as at most one late run is submitted."))  # fmt: skip
    return result, at


@transaction.atomic
def run_now(schedule: Schedule, *, by: User, now: datetime) -> ScheduleRun:
    """A run asked for by a member at `now`, out of the schedule's times, recorded as any run is: submitted as
    its runner (a run submits what the runner decided, whoever asks for it), skipped or replacing the last as
    its concurrency says, refused past the team's runs per minute (schedules.caps) or with the submission's
    reason. Its reason names who asked. Paused or not, the schedule's next planned time stays. A failure of the
    platform is recorded refused at once: no later pass takes a run asked for now again."""
    locked = (
        Schedule.objects.select_for_update(of=("self",))
        .select_related("team", "created_by", "runner", "template__image", "template__team")
        .get(pk=schedule.pk)
    )
    _record_run(locked, Planned(now, submit=True, retried=False), now=now, per_minute=RunsPerMinute())
    run = ScheduleRun.objects.select_related("job", "array").get(schedule=locked, planned_at=now)
    asked = f"Asked for now by {by.get_username()}."
    run.reason = f"{run.reason} {asked}" if run.reason else asked
    run.save(update_fields=["reason"])
    return run


def _local(at: datetime, zone: ZoneInfo) -> str:
    return f"{at.astimezone(zone):%Y-%m-%d %H:%M %Z}"


def _late_words(late: timedelta, deadline: timedelta) -> str:
    return (
        f"Missed: {int(late.total_seconds())} s after its planned time, past the starting deadline of "
        f"{int(deadline.total_seconds())} s (the pool or beat was down, or more schedules were due than the passes "
        "record in time)."
    )


def _outage_words(count: int, first: datetime, last: datetime, zone: ZoneInfo) -> str:
    return (
        f"Missed while no pass ran: {count} planned times from {_local(first, zone)} to {_local(last, zone)}, "
        "recorded as this one row."
    )


def _record_run(schedule: Schedule, planned: Planned, *, now: datetime, per_minute: RunsPerMinute) -> int:
    """One row for one planned time and what becomes of it, in one savepoint. The row comes first: its unique
    key claims the planned time, so a time another pass recorded costs nothing more here, and a submission
    that fails undoes the row with it (the next pass records the time again, unless `planned.retried` is False)."""
    with transaction.atomic():
        try:
            with transaction.atomic():
                status = RunStatus.SUBMITTED if planned.submit else RunStatus.MISSED
                run = ScheduleRun.objects.create(
                    schedule=schedule, planned_at=planned.at, status=status, reason=planned.missed, recorded_at=now
                )
        except IntegrityError:  # another pass recorded this planned time first
            return 0
        heard = True
        if planned.submit:
            heard = _submit(run, schedule, now=now, per_minute=per_minute, retried=planned.retried)
        if heard and run.status in (RunStatus.MISSED, RunStatus.REFUSED):
            run_not_submitted.send(sender=ScheduleRun, run=run)
    return 1


def _refuse_line(schedule: Schedule, why: cron.BadCron, *, now: datetime) -> int:
    """A line saved before the checks refused it (croniter's extensions) plans no time: its next planned time
    is recorded refused, saying why, and the schedule is paused, so no pass takes it again until a member
    gives it a standard line and resumes it. The pause is an event of its audit trail, the platform's (no
    actor), saying why: the trail would otherwise show a paused schedule nobody paused."""
    assert schedule.next_run_at is not None
    reason = f"Refused: its cron line is not taken any more. {why} The schedule is paused: give it a standard line."
    with transaction.atomic():
        run, made = ScheduleRun.objects.get_or_create(
            schedule=schedule, planned_at=schedule.next_run_at,
            defaults={"status": RunStatus.REFUSED, "reason": reason, "recorded_at": now},
        )  # fmt: skip
        Schedule.objects.filter(pk=schedule.pk).update(paused=True, changed_at=now)
        ScheduleEvent.objects.create(
            schedule=schedule, team_id=schedule.team_id, schedule_name=schedule.name,
            action=ScheduleEvent.Action.PAUSED, actor=None, at=now,
            reason=f"Its cron line is not taken any more: {why} Give it a standard line and resume it.",
        )  # fmt: skip
        if made:
            run_not_submitted.send(sender=ScheduleRun, run=run)
    return int(made)


def _submit(run: ScheduleRun, schedule: Schedule, *, now: datetime, per_minute: RunsPerMinute, retried: bool) -> bool:
    """The run as its concurrency says: submitted (replacing the last, which is cancelled), skipped, or
    refused with the reason (the team's runs of its minute at their cap among them). A replacement refused
    leaves the last run going (its cancel is undone). A failure of the platform is raised, so the next passes
    take the time again, for PLATFORM_RETRY (unless `retried` is False), then refused. False when the run is
    not to be heard: a refusal by the cap after the first of its team's minute."""
    last, going = _last_going(schedule, before=run) if schedule.concurrency != Concurrency.ALLOW else (None, "")
    if going and schedule.concurrency == Concurrency.FORBID:
        _set(run, RunStatus.SKIPPED, reason=f"Skipped: {going}, and concurrency is forbid.")
        return True
    if refused := per_minute.refusal(run, schedule.team, zone=ZoneInfo(schedule.time_zone)):
        _set(run, RunStatus.REFUSED, reason=refused)
        return per_minute.first_refused(run, schedule.team)
    reason = ""
    try:
        with transaction.atomic():  # the replaced run's cancel and the submission, undone together
            if going and last is not None:
                _cancel(last, now=now)
                reason = f"Replaced the last run: {going}, cancelled."
            made = submit_run(schedule, planned_at=run.planned_at)
    except Refused as exc:
        _set(run, RunStatus.REFUSED, reason=exc.explanation())
        return True
    except Exception as exc:
        # The platform's fault, not the team's: taken again by the next passes for a while (undone with its
        # row), then said as refused, so the schedule neither stalls unheard nor loses a run to a blip. A run
        # asked for now is said at once: no pass takes it again, and the person waits on the page.
        if retried and now - run.planned_at < PLATFORM_RETRY:
            raise
        log.exception("could not submit the run of schedule %s at %s", schedule.pk, run.planned_at)
        _set(run, RunStatus.REFUSED, reason=f"Not submitted: the platform failed ({type(exc).__name__}); it is logged.")
        return True
    job, array = (made, None) if isinstance(made, Job) else (None, made)
    _set(run, RunStatus.SUBMITTED, reason=reason, job=job, array=array)
    per_minute.submitted(run, schedule.team)
    return True


def _set(run: ScheduleRun, status: str, *, reason: str, job: Job | None = None, array: JobArray | None = None) -> None:
    run.status, run.reason, run.job, run.array = status, reason, job, array
    run.save(update_fields=["status", "reason", "job", "array"])


def _last_going(schedule: Schedule, *, before: ScheduleRun) -> tuple[ScheduleRun | None, str]:
    """The schedule's last submitted run before this one, and what it is doing when not released yet ("" when
    it is)."""
    last = (
        ScheduleRun.objects.filter(schedule=schedule, status=RunStatus.SUBMITTED, planned_at__lt=before.planned_at)
        .select_related("job", "array")
        .order_by("-planned_at")
        .first()
    )
    if last is None:
        return None, ""
    when = _local(last.planned_at, ZoneInfo(schedule.time_zone))
    if last.job is not None and last.job.stage != Stage.RELEASE:
        return last, f"the run of {when} (job {last.job.pk}) is still at {last.job.stage}"
    if last.array is not None and _tasks_going(last.array):
        return last, f"the run of {when} (array {last.array.pk}) still has tasks not released"
    return last, ""


def _tasks_going(array: JobArray) -> bool:
    # Its tasks, not its released_at: that is set by the scheduler pass that sees the last task released.
    return Job.objects.live().filter(array=array).exists()


def _cancel(run: ScheduleRun, *, now: datetime) -> None:
    """Cancel the run's job or array, as the platform."""
    if run.job is not None:
        actions.cancel(run.job, now=now)
    elif run.array is not None:
        cancel_array(run.array, now=now)
