"""The due pass: each planned time of a due schedule recorded once, as a run submitted, skipped, missed or refused,
in bounded passes that split the due schedules between them; at most one late run submitted when service
returns (docs/reference/schedules.md)."""

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
    return next(cron.planned_after(schedule.cron, ZoneInfo(schedule.time_zone), now))


def due_pass(*, now: datetime) -> int:
    """The others wait for the next passes, their planned times kept; the number of runs recorded."""
    ids = due_ids(now=now, most=settings.E31_SCHEDULES_PER_PASS)
    return record_due(ids, now=now, for_s=settings.E31_SCHEDULES_EVERY_S * PASS_SHARE)


def due_ids(*, now: datetime, most: int) -> list[int]:
    """Taken from each team in turn: a team with a thousand due waits for its own, not every other team."""
    turn = Window(RowNumber(), partition_by=[F("team_id")], order_by=[F("next_run_at").asc(), F("pk").asc()])
    due = Schedule.objects.filter(paused=False, next_run_at__lte=now).annotate(turn=turn)
    return list(due.order_by("turn", "next_run_at", "pk").values_list("pk", flat=True)[:most])


def record_due(schedule_ids: Iterable[int], *, now: datetime, for_s: float | None = None) -> int:
    """Those another pass is recording are left to it, and with `for_s` those not reached in time (a schedule
    begun is finished). Each run is a savepoint of its own: one failing is logged and stops no other."""
    ids, recorded, size = list(schedule_ids), 0, chunk_size()
    until = None if for_s is None else monotonic() + for_s
    for start in range(0, len(ids), size):
        if until is not None and monotonic() > until:
            break
        recorded += _record_some(ids[start : start + size], now=now, until=until)
    return recorded


def chunk_size() -> int:
    """One on SQLite (make run): its write lock is the whole database's, a chunk would make every writer wait."""
    return 1 if connection.vendor == "sqlite" else CHUNK


@dataclass(frozen=True)
class Planned:
    """`retried` False for a run asked for now, which no later pass takes again."""

    at: datetime
    submit: bool = False
    missed: str = ""
    retried: bool = True


@transaction.atomic
def _record_some(ids: list[int], *, now: datetime, until: float | None = None) -> int:
    # Those another pass holds are skipped; by team, so passes take the teams' row locks in one order.
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
            # Each run is a savepoint: those recorded stay; not advanced, the next pass takes the rest.
            log.exception("could not record the due runs of schedule %s", schedule.pk)
            continue
        schedule.next_run_at = after
        advanced.append(schedule)
    Schedule.objects.bulk_update(advanced, ["next_run_at"])
    return recorded


def plan(schedule: Schedule, *, now: datetime) -> tuple[list[Planned], datetime]:
    """The planned times up to `now`, each with what becomes of it, and the first after `now`. Only the first,
    the last MISSED_ROWS and the one submitted are kept: an outage of a week of minutes is a handful of rows."""
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
    """Recorded as any run is (submitted as its runner, whoever asks); the next planned time stays."""
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
    """The row comes first: its unique key claims the planned time, and a submission that fails undoes it."""
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
    """A line saved before the checks refused it plans no time: its next time is recorded refused and the
    schedule paused, the platform's event saying why (else the trail shows a pause nobody made)."""
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
    """Submitted (replacing the last), skipped or refused, as its concurrency says. False when the run is not
    to be heard: a refusal by the cap after the first of its team's minute."""
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
        # The platform's fault: taken again by the next passes for a while, then refused, so a blip loses no
        # run and the schedule never stalls unheard. A run asked for now is refused at once.
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
    """The last submitted run before this one, and what it is doing when not released yet ("" when it is)."""
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
    if run.job is not None:
        actions.cancel(run.job, now=now)
    elif run.array is not None:
        cancel_array(run.array, now=now)
