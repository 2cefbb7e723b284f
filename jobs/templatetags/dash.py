"""Filters the pages share: each kind of number written as core.formats writes it, with its unit."""

from datetime import timedelta
from decimal import Decimal

from django import template

from accounting import rates
from accounting.rates import currency
from core import formats
from jobs.models import Job
from jobs.web.figures import state_key

register = template.Library()
register.simple_tag(state_key)  # the job page's key of its live part, as jobs.web.figures makes it


@register.filter
def duration(value: timedelta | float | Decimal | str | None) -> str:
    """A time span, or seconds (a number or the exact text a statement line keeps, "165.857000"), as a person
    reads it: 45 s, 3 m 20 s, 2 h 05 m, 3 d 4 h."""
    return formats.duration(value)


register.filter("seconds", duration)  # the name templates give seconds the same words


@register.filter
def beyond_exit_code(job: Job) -> str:
    """The job's reason when it says more than its exit code."""
    return "" if job.exit_code is not None and job.reason == f"exit code {job.exit_code}" else job.reason


@register.filter
def share(value: float | Decimal | str | None) -> str:
    """A ratio as a percentage: 0.345 → 34.5 %."""
    return formats.percent(value)


@register.filter
def cost(value: Decimal | str | None, code: str = "") -> str:
    """A cost with its currency (the site's unless given), rounded half up to the cent (the record keeps the
    exact value); "less than 0.01" when it rounds to nothing."""
    return formats.money(value, code or currency())


register.filter("core_hours", formats.core_hours)  # the one wording of core-hours


@register.filter
def core_seconds(value: float | Decimal | None, bare: str = "") -> str:
    """Core-seconds (the utilisation's unit) as core-hours: 5400 → 1.50 core-hours; `core_seconds:"bare"`
    leaves the unit to a table's heading: 1.50."""
    shown = formats.core_hours(None if value is None else rates.core_hours(Decimal(str(value))))
    return shown.removesuffix(" core-hours") if bare else shown


@register.filter
def counted(n: int | None, unit: str) -> str:
    """A count with its unit, plural unless one: {{ job.cpus|counted:"core" }} → 1 core, 2 cores."""
    return formats.count(n, unit)


@register.filter
def outcome_label(value: str | None) -> str:
    """How a job or record ended, in words: out_of_memory → out of memory."""
    return formats.outcome_label(value)


@register.filter
def percent_of(part: float, whole: float) -> str:
    return formats.percent(part / whole) if whole else formats.percent(0)


@register.filter
def waited(job: Job) -> str:
    """A listed job's wait for its first hold, as its page's figures say (jobs.web.figures.with_first_held_at)."""
    first_held_at = job.first_held_at  # type: ignore[attr-defined]
    return formats.duration(first_held_at - job.submitted_at) if first_held_at else "—"
