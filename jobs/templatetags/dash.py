"""Filters the pages share: each kind of number written as core.formats writes it, with its unit."""

from decimal import Decimal

from django import template

from accounting import rates
from accounting.rates import currency
from core import formats
from jobs.lifecycle import excerpts
from jobs.models import Job
from jobs.web.figures import state_key

register = template.Library()
register.simple_tag(state_key)  # the job page's key of its live part, as jobs.web.figures makes it


# Time spans or seconds (a number, or the exact text a statement line keeps), 3 m 20 s; "seconds" for seconds.
register.filter("moment", formats.moment)  # 2026-12-06 20:08 in the viewer's zone, which the footer names
register.filter("since", formats.since)  # {{ job.submitted_at|since:now }} → 2 h 05 m ago
register.filter("duration", formats.duration)
register.filter("seconds", formats.duration)
register.filter("share", formats.percent)  # a ratio as a percentage: 0.345 → 34.5 %
register.filter("core_hours", formats.core_hours)
register.filter("counted", formats.count)  # {{ job.cpus|counted:"core" }} → 1 core, 2 cores
register.filter("outcome_label", formats.outcome_label)  # out_of_memory → out of memory
register.filter("last_line", excerpts.last_line)  # a failure excerpt's line, where one line is room enough


@register.filter
def beyond_exit_code(job: Job) -> str:
    """The job's reason when it says more than its exit code."""
    return "" if job.exit_code is not None and job.reason == f"exit code {job.exit_code}" else job.reason


@register.filter
def cost(value: Decimal | str | None, code: str = "") -> str:
    """A cost with its currency (the site's unless given), rounded half up to the cent (the record keeps the
    exact value); "less than 0.01" when it rounds to nothing."""
    return formats.money(value, code or currency())


@register.filter
def core_seconds(value: float | Decimal | None, bare: str = "") -> str:
    """Core-seconds (the utilisation's unit) as core-hours: 5400 → 1.50 core-hours; `core_seconds:"bare"`
    leaves the unit to a table's heading: 1.50."""
    shown = formats.core_hours(None if value is None else rates.core_hours(Decimal(str(value))))
    return shown.removesuffix(" core-hours") if bare else shown


@register.filter
def percent_of(part: float, whole: float) -> str:
    return formats.percent(part / whole) if whole else formats.percent(0)


@register.filter
def waited(job: Job) -> str:
    """A listed job's wait for its first hold, as its page's figures say (jobs.web.figures.with_row_figures)."""
    first_held_at = job.first_held_at  # type: ignore[attr-defined]
    return formats.duration(first_held_at - job.submitted_at) if first_held_at else "—"
