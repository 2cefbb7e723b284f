"""A job's worst case and its team's budget: the jobs side of accounting.budgets and accounting.rates.

The worst case of a job is its whole request (cpus, memory, gpus) held for as long as the meter may
count a hold (its time limit and the platform's overhead: accounting.rates.metered_bound_s), at the
rate in force when it is (or, still waiting, would now be) held: what its record costs at most,
however its run ends. The form, the job page, the API's `estimated_cost` and
POST /api/v1/jobs/estimate/ all show it, through accounting.rates.estimate.
"""

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
    """Raise accounting.budgets.OverBudget when the job would take its team past its budget.

    The caller holds the team's row lock (jobs.submit.service.submit), so a second submission of the team
    waits and then counts this one. Most teams have no budget: that is read from the team as the form
    loaded it, without a query; a budget's unit is read again under the lock, so the check counts in
    the unit in force."""
    if budgets.budget_unit(team, loaded=True) is None or (unit := budgets.budget_unit(team)) is None:
        return
    budgets.check(team, estimate=budgets.worst_case(value, unit), committed=committed(team, unit, now=now), now=now)
