"""What a schedule will cost this budget month: the runs its cron line still plans, times the worst case of
what each run submits, in the unit of the team's budget."""

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter
from django.conf import settings

from accounting import budgets
from accounting.models import BudgetUnit
from accounting.rates import Estimate, RateBook, currency
from core.when import job_duration
from jobs.submit.indices import BadIndices, parse_indices
from schedules import cron
from schedules.models import Schedule

SECOND = timedelta(seconds=1)


@dataclass(frozen=True)
class Forecast:
    runs_left: int
    per_run: Estimate | None  # None: what it submits cannot be costed (its template is gone)
    tasks: int  # jobs a run submits (an array's size)
    unit: str  # the budget's unit, money without a budget
    standing: budgets.Standing | None  # the team's budget this month, or None

    @property
    def total(self) -> Decimal:
        if self.per_run is None:
            return Decimal(0)
        return budgets.worst_case(self.per_run, self.unit) * self.tasks * self.runs_left

    def amount(self, value: Decimal) -> str:
        return budgets.in_unit(value, self.unit, currency_code=self.per_run.currency if self.per_run else "")

    @property
    def total_text(self) -> str:
        return self.amount(self.total)

    @property
    def per_run_text(self) -> str:
        return "" if self.per_run is None else self.amount(budgets.worst_case(self.per_run, self.unit) * self.tasks)

    def as_dict(self) -> dict[str, Any]:
        found = self.standing
        return {
            "runs_left": self.runs_left,
            "tasks_per_run": self.tasks,
            "unit": self.unit,
            "currency": currency() if self.unit == BudgetUnit.MONEY else "",
            "per_run": format(budgets.worst_case(self.per_run, self.unit) * self.tasks, "f") if self.per_run else None,
            "total": format(self.total, "f"),
            "words": self.total_text,
            "budget": None
            if found is None
            else {
                "month": f"{found.month:%Y-%m}",
                "limit": format(found.limit, "f"),
                "spent": format(found.spent, "f"),
                "committed": format(found.committed, "f"),
                "left": format(found.limit - found.used, "f"),
            },
        }


def runs_left(schedule: Schedule, *, now: datetime) -> int:
    if schedule.paused:
        return 0
    _, end = budgets.month_bounds(budgets.month_of(now))
    try:
        # month_bounds' end is exclusive; planned times are whole minutes.
        return count_between(schedule.cron, ZoneInfo(schedule.time_zone), now, end - timedelta(seconds=1))
    except cron.BadCron:
        return 0


def count_between(line: str, zone: ZoneInfo, start: datetime, end: datetime) -> int:
    """len(cron.planned_between(...)) without listing every time: a whole day counts its hours × minutes; the
    first and last days and a day whose clock changes are walked time by time, so cron's rules decide them."""
    fields = cron.expression(line).split(" ")
    minutes, hours = croniter(" ".join(fields)).expanded[:2]
    per_day = (60 if minutes == ["*"] else len(minutes)) * (24 if hours == ["*"] else len(hours))
    first, last = start.astimezone(zone).date(), end.astimezone(zone).date()
    days = croniter(f"0 0 {' '.join(fields[2:])}", datetime.combine(first, time.min) - timedelta(minutes=1))
    total = 0
    while (day := days.get_next(datetime)).date() <= last:
        opens, closes = cron.instant_of(day, zone), cron.instant_of(day + timedelta(days=1), zone)
        if first < day.date() < last and closes - opens == timedelta(days=1):
            total += per_day
        else:
            total += len(cron.planned_between(line, zone, max(start, opens - SECOND), min(end, closes - SECOND)))
    return total


def run_estimate(schedule: Schedule, *, now: datetime, book: RateBook) -> tuple[Estimate | None, int]:
    if schedule.template_id is not None:
        template = schedule.template
        assert template is not None
        image, indices = template.image.name, template.array_indices
        cpus, memory_mb, gpus, time_limit_s = template.cpus, template.memory_mb, template.gpus, template.time_limit_s
    elif schedule.job is not None:
        job = schedule.job
        try:
            image, indices = str(job.get("image", "")), str(job.get("indices") or "")
            cpus, memory_mb, gpus = int(job.get("cpus", 1)), int(job.get("memory_mb", 0)), int(job.get("gpus") or 0)
            time_limit_s = job_duration("time_limit_s", job.get("time_limit_s"))
        except (TypeError, ValueError):  # checked at create time; one the form would refuse now costs nothing
            return None, 0
    else:
        return None, 0
    try:
        tasks = len(parse_indices(indices, most=settings.E31_ARRAY_MAX_TASKS)) if indices.strip() else 1
    except BadIndices:
        return None, 0
    request = {"cpus": cpus, "memory_mb": memory_mb, "gpus": gpus, "time_limit_s": time_limit_s}
    return book.estimate(now, image=image, **request), tasks


def forecast(
    schedule: Schedule, *, now: datetime, book: RateBook, standing: budgets.Standing | None, unit: str | None
) -> Forecast:
    per_run, tasks = run_estimate(schedule, now=now, book=book)
    return Forecast(runs_left(schedule, now=now), per_run, tasks, unit or BudgetUnit.MONEY, standing)
