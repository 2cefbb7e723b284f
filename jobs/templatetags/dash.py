"""Filters the pages share: durations, shares, costs with their unit."""

from datetime import timedelta
from decimal import Decimal

from django import template

from accounting.rates import currency, shown
from jobs.figures import state_key
from jobs.models import Job

register = template.Library()
register.simple_tag(state_key)  # the job page's key of its live part, as jobs.figures makes it


@register.filter
def duration(value: timedelta | None) -> str:
    """A time span as a person reads it: 45 s, 3 m 20 s, 2 h 05 m, 3 d 4 h."""
    if value is None:
        return "—"
    seconds = max(0, int(value.total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    minutes, s = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} m {s:02d} s"
    hours, m = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {m:02d} m"
    days, h = divmod(hours, 24)
    return f"{days} d {h} h"


@register.filter
def seconds(value: int | None) -> str:
    return duration(timedelta(seconds=value)) if value is not None else "—"


@register.filter
def beyond_exit_code(job: Job) -> str:
    """The job's reason when it says more than its exit code."""
    return "" if job.exit_code is not None and job.reason == f"exit code {job.exit_code}" else job.reason


@register.filter
def share(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.0f}%"


@register.filter
def cost(value: Decimal | None) -> str:
    """A cost with its currency, rounded half up to the cent (the record keeps the exact value)."""
    return "—" if value is None else f"{shown(value)} {currency()}"


@register.filter
def percent_of(part: float, whole: float) -> int:
    return int(100 * part / whole) if whole else 0


@register.filter
def waited(job: Job) -> str:
    """A listed job's wait for its first hold, as its page's figures say (jobs.figures.with_first_held_at)."""
    first_held_at = job.first_held_at  # type: ignore[attr-defined]
    return duration(first_held_at - job.submitted_at) if first_held_at else "—"
