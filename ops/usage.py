"""A team's usage: its records aggregated in the database for the jobs the list's filters select."""

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.db.models import Count, DecimalField, Max, Min, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounting.models import Record
from accounting.rates import core_hours, record_core_seconds
from core.charts import Chart, bar_chart
from jobs.models import Job
from pool.utilisation import align, held_core_seconds
from teams.access import AnyUser, teams_of

ZERO = Decimal(0)
HOURLY_UNDER = 48  # a window shorter than this many hours is drawn by hour
MOST_DAYS = 92  # a longer window is drawn by week
MOST_WEEKS = 520  # and at most ten years of weeks


@dataclass
class Totals:
    jobs: int
    records: int
    held_seconds: Decimal
    core_hours: Decimal
    cpu_seconds: Decimal
    cost: Decimal


def records_for(user: AnyUser, jobs: QuerySet[Job] | None) -> QuerySet[Record]:
    """The records of the user's teams; of the `jobs` selected only, when a filter selected some."""
    records = Record.objects.filter(team__in=teams_of(user))
    return records if jobs is None else records.filter(job__in=jobs.values("pk"))


def totals(records: QuerySet[Record], jobs: int, *, now: datetime, kept_for: list[int] | None = None) -> Totals:
    """The sums of `records`; with `kept_for` (the teams these are all the records of), the older ones cached."""
    if kept_for is None:
        sums = _sums(records)
    else:
        closed_until = align(now, "day") - timedelta(days=1)
        teams = ",".join(str(pk) for pk in sorted(kept_for))
        key = f"ops:usage-totals:{connection.settings_dict['NAME']}:{teams}:{closed_until:%Y%m%d}"
        closed = cache.get(key)
        if closed is None:
            closed = _sums(records.filter(released_at__lt=closed_until))
            cache.set(key, closed, timeout=2 * 86400)
        live = _sums(records.filter(released_at__gte=closed_until))
        sums = {name: closed[name] + live[name] for name in live}
    return Totals(
        jobs=jobs,
        records=sums["records"],
        held_seconds=sums["held"],
        core_hours=core_hours(sums["cores"]),
        cpu_seconds=sums["cpu"],
        cost=sums["cost"],
    )


def _sums(records: QuerySet[Record]) -> dict[str, Any]:
    return records.aggregate(
        records=Count("id"),
        held=Coalesce(Sum("held_seconds"), ZERO),
        cores=Coalesce(Sum(record_core_seconds(), output_field=DecimalField()), ZERO),
        cpu=Coalesce(Sum("cpu_seconds"), ZERO),
        cost=Coalesce(Sum("cost"), ZERO),
    )


def over_time(records: QuerySet[Record], *, start: datetime, end: datetime, now: datetime) -> Chart:
    """Core-hours held per hour (under HOURLY_UNDER hours, in the viewer's zone), day or week (past MOST_DAYS);
    a window past MOST_WEEKS weeks is narrowed to its records, then to its last weeks."""
    start, end = _narrowed(records, start, end)
    if end - start < timedelta(hours=HOURLY_UNDER):
        return _hourly(records, start=start, end=end, now=now)
    weekly = (end - start).days > MOST_DAYS
    step = timedelta(days=7 if weekly else 1)
    first = align(start, "day")
    if weekly:
        first -= timedelta(days=first.weekday())
    buckets, days = -(-(end - first) // step), step.days
    per_day = [0.0] * (buckets * days)
    held = held_core_seconds(since=first, count=len(per_day), step="day", now=now, records=records)
    for (_node, day), core_seconds in held.items():
        per_day[day] += core_hours(core_seconds)
    points = [((first + i * step).strftime("%m-%d"), sum(per_day[i * days : (i + 1) * days])) for i in range(buckets)]
    title = "Core-hours held per week" if weekly else "Core-hours held per day"
    return bar_chart(points, title=title, unit="core-hours", every=max(1, len(points) // 6))


def _hourly(records: QuerySet[Record], *, start: datetime, end: datetime, now: datetime) -> Chart:
    first, hour = align(start, "hour"), timedelta(hours=1)
    count = max(1, -(-(end - first) // hour))
    per_hour = [0.0] * count
    for (_node, i), core_seconds in held_core_seconds(since=first, count=count, step="hour", now=now,
                                                      records=records).items():  # fmt: skip
        per_hour[i] += core_hours(core_seconds)
    points = [(f"{timezone.localtime(first + i * hour):%m-%d %H:%M}", per_hour[i]) for i in range(count)]
    return bar_chart(points, title="Core-hours held per hour", unit="core-hours", every=max(1, count // 6))


def _narrowed(records: QuerySet[Record], start: datetime, end: datetime) -> tuple[datetime, datetime]:
    most = timedelta(weeks=MOST_WEEKS)
    if end - start <= most:
        return start, end
    span = records.filter(released_at__gte=start, released_at__lt=end).aggregate(
        first=Min("released_at"), last=Max("released_at")
    )
    if span["first"] is not None:
        start, end = max(start, span["first"]), min(end, span["last"] + timedelta(days=1))
    return max(start, end - most), end


def costs_by_job(job_ids: list[Any]) -> dict[Any, dict[str, Any]]:
    """The summed records of each of `job_ids` (a retried job has several), in one query."""
    rows = (
        Record.objects.filter(job_id__in=job_ids)
        .values("job_id")
        .annotate(held=Sum("held_seconds"), cpu=Sum("cpu_seconds"), cost=Sum("cost"), peak=Sum("memory_peak_mb"))
    )
    return {row["job_id"]: row for row in rows}


CSV_COLUMNS = [
    "job", "name", "team", "submitted_by", "image", "submitted_at", "released_at", "outcome", "cpus",
    "memory_mb", "gpus", "held_seconds", "cpu_seconds", "cost",
]  # fmt: skip


def csv_rows(jobs: QuerySet[Job]) -> Iterator[list[Any]]:
    """One row per job with its records summed, read in chunks so a long export never holds every job."""
    yield CSV_COLUMNS
    rows = jobs.annotate(
        held=Sum("records__held_seconds"), cpu=Sum("records__cpu_seconds"), cost_sum=Sum("records__cost")
    ).values_list(
        "id", "name", "team__slug", "submitted_by__username", "image__name", "submitted_at", "released_at",
        "outcome", "cpus", "memory_mb", "gpus", "held", "cpu", "cost_sum",
    )  # fmt: skip
    for row in rows.iterator(chunk_size=2000):
        yield ["" if value is None else value.isoformat() if isinstance(value, datetime) else value for value in row]
