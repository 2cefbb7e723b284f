"""A schedule's changes, one atomic function each, every one kept as a ScheduleEvent naming who acted.
`next_run_at` is planned from now when a schedule is made, resumed, or given another cron line or zone."""

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from jobtemplates.models import JobTemplate
from schedules.caps import check_room
from schedules.models import Concurrency, Schedule, ScheduleEvent
from schedules.runs import first_planned
from teams.access import teams_of
from teams.models import Team

# The fields a change may set, as the API names them; a template is kept in an event by its id.
CHANGEABLE = ("name", "cron", "time_zone", "template", "job", "concurrency", "starting_deadline_s")
REPLANNED_BY = frozenset({"cron", "time_zone"})


def _event(schedule: Schedule, action: str, *, by: User | None, now: datetime, changes: dict | None = None) -> None:
    ScheduleEvent.objects.create(
        schedule=schedule, team_id=schedule.team_id, schedule_name=schedule.name, action=action,
        actor=by, at=now, changes=changes or {},
    )  # fmt: skip


def _shown(value: Any) -> Any:
    return value.pk if isinstance(value, JobTemplate) else value


@transaction.atomic
def create_schedule(
    *,
    team: Team,
    name: str,
    cron: str,
    time_zone: str,
    template: JobTemplate | None,
    job: dict | None,
    concurrency: str = Concurrency.ALLOW,
    starting_deadline_s: int | None = None,
    paused: bool = False,
    by: User,
    now: datetime,
) -> Schedule:
    """Checked by the caller (the API's serializer); TooManySchedules when the team has its most."""
    check_room(team)
    schedule = Schedule(
        team=team, name=name, cron=cron, time_zone=time_zone, template=template, job=job, concurrency=concurrency,
        starting_deadline_s=starting_deadline_s, paused=paused, created_by=by, created_at=now, changed_at=now,
    )  # fmt: skip
    schedule.next_run_at = first_planned(schedule, now=now)
    schedule.save()
    _event(schedule, ScheduleEvent.Action.CREATED, by=by, now=now)
    return schedule


@transaction.atomic
def change_schedule(schedule: Schedule, *, changes: dict[str, Any], by: User, now: datetime) -> Schedule:
    """One event lists each field that differs as [before, after]."""
    if unknown := set(changes) - set(CHANGEABLE):
        raise ValueError(f"not a changeable field: {', '.join(sorted(unknown))}")
    locked = Schedule.objects.select_for_update().get(pk=schedule.pk)
    differ: dict[str, list[Any]] = {}
    for name, value in changes.items():
        before = getattr(locked, name)
        if before != value:
            differ[name] = [_shown(before), _shown(value)]
            setattr(locked, name, value)
    if not differ:
        return locked
    if {"job", "template"} & set(differ):
        _runner_after(locked, by, member=True, differ=differ)
    locked.changed_at = now
    fields = [*differ, "changed_at"]
    if REPLANNED_BY & set(differ):
        locked.next_run_at = first_planned(locked, now=now)
        fields.append("next_run_at")
    locked.save(update_fields=fields)
    _event(locked, ScheduleEvent.Action.CHANGED, by=by, now=now, changes=differ)
    return locked


def _runner_after(schedule: Schedule, by: User | None, *, member: bool, differ: dict[str, list[Any]]) -> None:
    """Who acted is who wrote the code: a member who changes what it runs becomes its `runner`, or any member
    could have their own code run as a colleague (docs/reference/schedules.md)."""
    if by is None or not member or by.pk == schedule.runs_as.pk:
        return
    differ["runner"] = [schedule.runs_as.get_username(), by.get_username()]
    schedule.runner = by


@transaction.atomic
def reach_schedules(template: JobTemplate, *, by: User | None, changes: dict[str, list[Any]], now: datetime) -> int:
    """A change of a template reaches every schedule that runs it: an event each, and its runner."""
    teams = set(teams_of(by).values_list("pk", flat=True)) if by is not None else set()
    schedules = Schedule.objects.select_for_update(of=("self",)).filter(template=template)
    reached = 0
    for schedule in schedules.select_related("runner", "created_by").order_by("pk"):
        differ = {f"template {what}": values for what, values in changes.items()}
        _runner_after(schedule, by, member=schedule.team_id in teams, differ=differ)
        schedule.changed_at = now
        schedule.save(update_fields=["runner", "changed_at"])
        _event(schedule, ScheduleEvent.Action.CHANGED, by=by, now=now, changes=differ)
        reached += 1
    return reached


@transaction.atomic
def pause_schedule(schedule: Schedule, *, by: User, now: datetime) -> Schedule:
    locked = Schedule.objects.select_for_update().get(pk=schedule.pk)
    if locked.paused:
        return locked
    locked.paused, locked.changed_at = True, now
    locked.save(update_fields=["paused", "changed_at"])
    _event(locked, ScheduleEvent.Action.PAUSED, by=by, now=now)
    return locked


@transaction.atomic
def resume_schedule(schedule: Schedule, *, by: User, now: datetime) -> Schedule:
    """The times passed while paused are not caught up."""
    locked = Schedule.objects.select_for_update().get(pk=schedule.pk)
    if not locked.paused:
        return locked
    locked.paused, locked.changed_at = False, now
    locked.next_run_at = first_planned(locked, now=now)
    locked.save(update_fields=["paused", "changed_at", "next_run_at"])
    _event(locked, ScheduleEvent.Action.RESUMED, by=by, now=now)
    return locked


@transaction.atomic
def delete_schedule(schedule: Schedule, *, by: User, now: datetime) -> None:
    locked = Schedule.objects.select_for_update().get(pk=schedule.pk)
    _event(locked, ScheduleEvent.Action.DELETED, by=by, now=now)
    locked.delete()
