"""What each event says (the `data` of a delivery's body), built from the object when the event happens
and kept with the delivery, so a retry or a redelivery sends what was true then."""

from typing import Any

from django.urls import reverse

from accounting.models import BudgetWarning
from core.site import site_url
from jobs.lifecycle.array_state import counts
from jobs.models import Job, JobArray
from schedules.models import ScheduleRun


def _moment(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _released(released: Job | JobArray, view: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": str(released.pk),
        "name": released.name,
        "team": released.team.slug,
        **fields,
        "released_at": _moment(released.released_at),
        "url": site_url(reverse(view, args=[released.pk])),
    }


def job_released(job: Job) -> dict[str, Any]:
    return _released(job, "jobs:detail", outcome=job.outcome, exit_code=job.exit_code, reason=job.reason)


def array_released(array: JobArray) -> dict[str, Any]:
    return _released(array, "jobs:array", size=array.size, counts=counts(array))


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


def budget_warning(warning: BudgetWarning) -> dict[str, Any]:
    return {
        "team": warning.team.slug,
        "month": f"{warning.month:%Y-%m}",
        "level": warning.level,
        "spent": str(warning.spent),
        "limit": str(warning.limit),
        "unit": warning.unit,
    }
