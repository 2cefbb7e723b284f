"""Accounting on the team's pages: the budget warning, a job's retention and estimate."""

from typing import Any

from django import template
from django.utils import timezone

from jobs.lifecycle.worst_case import job_estimate, standing
from jobs.models import Job
from jobs.storage.retention import retention_of
from teams.access import AnyUser, teams_of

register = template.Library()


@register.inclusion_tag("accounting/partials/budget_warning.html")
def budget_warnings(user: AnyUser) -> dict[str, Any]:
    """The caller's teams near this month's budget, their jobs' worst case counted."""
    now = timezone.now()
    budgeted = teams_of(user).filter(budget__isnull=False)  # one query when no team has a budget
    found = [s for team in budgeted if (s := standing(team, now=now)) is not None and s.warn]
    return {"standings": found}


@register.inclusion_tag("accounting/partials/retention.html")
def retention_panel(job: Job) -> dict[str, Any]:
    return {"job": job, "retention": retention_of(job), "estimate": job_estimate(job, now=timezone.now())}
