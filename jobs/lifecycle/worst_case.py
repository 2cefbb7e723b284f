"""A job's worst case (its whole request held as long as the meter may count, at the rate in force) and its
team's budget: the jobs side of accounting.budgets and accounting.rates (docs/reference/accounting.md)."""

from datetime import datetime
from decimal import Decimal

from accounting import budgets
from accounting.rates import Estimate, RateBook, estimate, rate_in_force
from jobs.models import Job, RuntimeImage
from teams.models import Team


def job_estimate(job: Job, *, now: datetime, book: RateBook | None = None) -> Estimate:
    """A job's worst case, at the rate of its RENT (now, while it waits)."""
    at = job.held_at or now
    image = job.image.name
    request = {"cpus": job.cpus, "memory_mb": job.memory_mb, "gpus": job.gpus, "time_limit_s": job.time_limit_s}
    if book is not None:
        return book.estimate(at, image=image, **request)
    return estimate(rate=rate_in_force(at, image=image), **request)


def request_estimate(
    *, cpus: int, memory_mb: int, gpus: int, time_limit_s: int, image: RuntimeImage | None, now: datetime
) -> Estimate:
    """The worst case of a job not submitted yet (the form, POST /api/v1/jobs/estimate/)."""
    rate = rate_in_force(now, image=image.name if image else "")
    return estimate(cpus=cpus, memory_mb=memory_mb, gpus=gpus, time_limit_s=time_limit_s, rate=rate)


def committed(team: Team, unit: str, *, now: datetime) -> Decimal:
    """The worst case of the team's jobs not released yet, in the budget's unit."""
    book = RateBook.load()
    jobs = Job.objects.live().filter(team=team).select_related("image")
    return sum((budgets.worst_case(job_estimate(job, now=now, book=book), unit) for job in jobs), Decimal(0))


def standing(team: Team, *, now: datetime) -> budgets.Standing | None:
    unit = budgets.budget_unit(team)
    if unit is None:
        return None
    return budgets.standing(team, committed=committed(team, unit, now=now), now=now)


def check_submission(team: Team, value: Estimate, *, now: datetime) -> None:
    """Raise OverBudget when the job would take its team past its budget. The caller holds the team's row lock;
    most teams have no budget, read without a query, and a budget's unit is read again under the lock."""
    if budgets.budget_unit(team, loaded=True) is None or (unit := budgets.budget_unit(team)) is None:
        return
    budgets.check(team, estimate=budgets.worst_case(value, unit), committed=committed(team, unit, now=now), now=now)
