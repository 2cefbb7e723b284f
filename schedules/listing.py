"""Schedules as the API and the page show them, in a fixed number of queries whatever their number."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from django.db.models import Count, Prefetch, Q, QuerySet

from accounting import budgets
from accounting.rates import RateBook
from core.outcomes import Outcome
from jobs.lifecycle import array_state, worst_case
from jobs.lifecycle.array_state import array_outcome, counts
from schedules import cron
from schedules.forecast import Forecast, forecast
from schedules.models import RunStatus, Schedule, ScheduleEvent, ScheduleRun
from teams.models import Team

RECENT_RUNS = 5
TOLD = [*array_state.FAILED, Outcome.CANCELLED]  # the outcomes an array's own outcome is read from
RECENT_EVENTS = 10


def runs_shown(runs: QuerySet[ScheduleRun]) -> QuerySet[ScheduleRun]:
    """An array's tasks counted by each outcome that tells its own, as `array_<outcome>`."""
    told = {f"array_{o}": Count("array__tasks", filter=Q(array__tasks__outcome=o)) for o in TOLD}
    return runs.select_related("job", "array").annotate(**told)


def outcome_of(run: ScheduleRun) -> str:
    if run.job_id is not None and run.job is not None:
        return run.job.outcome if run.job.released_at else ""
    if run.array_id is not None and run.array is not None and run.array.released_at:
        told: dict[str, int | None] = {str(o): getattr(run, f"array_{o}", None) for o in TOLD}
        found = counts(run.array) if None in told.values() else {o: n or 0 for o, n in told.items()}
        return array_outcome(found)
    return ""


def submitted_runs(schedule: Schedule) -> int:
    return schedule.runs.filter(status=RunStatus.SUBMITTED).count()


def shown(schedules: QuerySet[Schedule], *, recent: int = RECENT_RUNS) -> QuerySet[Schedule]:
    """With their last `recent` runs as `recent_runs`, newest first."""
    runs = runs_shown(ScheduleRun.objects.order_by("-planned_at"))[:recent]
    return schedules.select_related("team", "template__image", "created_by", "runner").prefetch_related(
        Prefetch("runs", queryset=runs, to_attr="recent_runs")
    )


def budgets_of(teams: Iterable[Team], *, now: datetime) -> dict[int, tuple[budgets.Standing | None, str | None]]:
    found: dict[int, tuple[budgets.Standing | None, str | None]] = {}
    for team in teams:
        if team.pk not in found:
            standing = worst_case.standing(team, now=now)
            found[team.pk] = (standing, standing.unit if standing else None)
    return found


def with_events(schedules: QuerySet[Schedule], *, recent: int = RECENT_EVENTS) -> QuerySet[Schedule]:
    events = ScheduleEvent.objects.select_related("actor").order_by("-at", "-pk")[:recent]
    return schedules.prefetch_related(Prefetch("events", queryset=events, to_attr="recent_events"))


@dataclass(frozen=True)
class Row:
    schedule: Schedule
    description: str
    next_runs: list[datetime]
    runs: list[tuple[ScheduleRun, str]]  # with each one's outcome (outcome_of)
    forecast: Forecast
    events: list[ScheduleEvent]


def rows(schedules: Iterable[Schedule], *, now: datetime) -> list[Row]:
    loaded = list(schedules)
    teams = budgets_of((s.team for s in loaded), now=now)
    book = RateBook.load()
    found = []
    for schedule in loaded:
        standing, unit = teams[schedule.team_id]
        found.append(
            Row(
                schedule,
                cron.describe(schedule.cron),
                cron.next_runs(schedule.cron, ZoneInfo(schedule.time_zone), now),
                [(run, outcome_of(run)) for run in getattr(schedule, "recent_runs", [])],
                forecast(schedule, now=now, book=book, standing=standing, unit=unit),
                list(getattr(schedule, "recent_events", [])),
            )
        )  # fmt: skip
    return found
