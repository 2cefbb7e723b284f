"""What each event says (the `data` of a delivery's body), built from the object when the event happens
and kept with the delivery, so a retry or a redelivery sends what was true then."""

from typing import Any, Protocol

from django.conf import settings
from django.urls import reverse

from jobs.array_state import counts
from jobs.models import Job, JobArray
from schedules.models import ScheduleRun
from teams.models import Team


def _site(path: str) -> str:
    return settings.E31_SITE_URL + path


def _moment(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def job_released(job: Job) -> dict[str, Any]:
    return {
        "id": str(job.pk),
        "name": job.name,
        "team": job.team.slug,
        "outcome": job.outcome,
        "exit_code": job.exit_code,
        "reason": job.reason,
        "released_at": _moment(job.released_at),
        "url": _site(reverse("jobs:detail", args=[job.pk])),
    }


def array_released(array: JobArray) -> dict[str, Any]:
    return {
        "id": str(array.pk),
        "name": array.name,
        "team": array.team.slug,
        "size": array.size,
        "counts": counts(array),
        "released_at": _moment(array.released_at),
        "url": _site(reverse("jobs:array", args=[array.pk])),
    }


def schedule_run(run: ScheduleRun) -> dict[str, Any]:
    schedule = run.schedule
    return {
        "schedule": schedule.pk,
        "name": schedule.name,
        "team": schedule.team.slug,
        "planned_at": _moment(run.planned_at),
        "status": run.status,
        "reason": run.reason,
    }


class BudgetWarning(Protocol):
    """What webhooks read of accounting's BudgetWarning."""

    team: Team
    month: Any  # a date, the 1st of the month
    level: int
    unit: str
    spent: Any  # Decimal
    limit: Any  # Decimal
    at: Any  # a datetime: when it was crossed


def budget_warning(warning: BudgetWarning) -> dict[str, Any]:
    return {
        "team": warning.team.slug,
        "month": f"{warning.month:%Y-%m}",
        "level": warning.level,
        "spent": str(warning.spent),
        "limit": str(warning.limit),
        "unit": warning.unit,
    }
