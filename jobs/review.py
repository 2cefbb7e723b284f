"""The morning review, and the figures every page shows of a job: what ended since a time (failures
first), how long it waited and ran, what it cost, how well it used what it held; counts by outcome;
what runs and what waits now."""

import hashlib
from dataclasses import dataclass
from datetime import datetime, time, timedelta, tzinfo
from decimal import Decimal
from typing import Any

from django.db.models import Case, Count, IntegerField, OuterRef, Prefetch, Q, QuerySet, Subquery, Sum, Value, When
from django.db.models.functions import Coalesce

from accounting.models import Record
from jobs.models import Job, Outcome, OutputFile, Stage
from pool.models import Node
from pool.nodes import free_capacity

# Outcomes the review lists first: the run did not do its work. (Cancelled was someone's choice.)
FAILURES = [Outcome.FAILED, Outcome.TIMED_OUT, Outcome.OUT_OF_MEMORY, Outcome.NODE_LOST, Outcome.REJECTED]
RUNNING = [Stage.RENT, Stage.RUN, Stage.OUTPUT]
WINDOWS = [("24 h", timedelta(days=1)), ("7 d", timedelta(days=7)), ("30 d", timedelta(days=30))]
# A job that used less than this share of the cpu time or memory it held asked for too much.
OVER_ASKED_BELOW = 0.5
# Below this many seconds held, a job's efficiency says nothing (start-up dominates).
EFFICIENCY_AFTER_S = 10


def default_since(now: datetime, zone: tzinfo) -> datetime:
    """18:00 the day before, in the team's time zone: "what happened overnight"."""
    day = now.astimezone(zone).date() - timedelta(days=1)
    return datetime.combine(day, time(18), tzinfo=zone)


def with_figures(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """Jobs with what the pages show of each, in a fixed number of queries whatever their number:
    the count and size of their outputs, their records (for cost and efficiency)."""
    outputs = OutputFile.objects.filter(job=OuterRef("pk")).order_by().values("job")
    return (
        jobs.select_related("image", "submitted_by", "team", "cancelled_by")
        .annotate(
            outputs_count=Coalesce(Subquery(outputs.annotate(n=Count("pk")).values("n")), Value(0)),
            outputs_size=Coalesce(Subquery(outputs.annotate(s=Sum("size")).values("s")), Value(0)),
        )
        .prefetch_related(Prefetch("records", queryset=Record.objects.order_by("sequence"), to_attr="record_list"))
    )


def ended(jobs: QuerySet[Job], *, since: datetime, until: datetime | None = None) -> QuerySet[Job]:
    """The jobs released in [since, until), failures first, then the latest first."""
    released = jobs.filter(stage=Stage.RELEASE, released_at__gte=since)
    if until is not None:
        released = released.filter(released_at__lt=until)
    failed_first = Case(When(outcome__in=FAILURES, then=Value(0)), default=Value(1), output_field=IntegerField())
    return with_figures(released).annotate(failed_first=failed_first).order_by("failed_first", "-released_at", "pk")


def outcome_counts(jobs: QuerySet[Job], *, now: datetime) -> list[dict]:
    """Per outcome, how many jobs ended with it over each window: one query over the longest window,
    grouped by outcome (an index-only scan of job_team_released)."""
    longest = max(span for _, span in WINDOWS)
    windows = {f"n{i}": Count("pk", filter=Q(released_at__gte=now - span)) for i, (_, span) in enumerate(WINDOWS)}
    grouped = (
        jobs.filter(stage=Stage.RELEASE, released_at__gte=now - longest)
        .order_by()
        .values("outcome")
        .annotate(**windows)
    )
    counted = {row["outcome"]: [row[f"n{i}"] for i in range(len(WINDOWS))] for row in grouped}
    rows = [
        {"outcome": outcome, "label": label, "counts": counted.get(outcome, [0] * len(WINDOWS))}
        for outcome, label in Outcome.choices
    ]
    totals = [sum(row["counts"][i] for row in rows) for i in range(len(WINDOWS))]
    return [*rows, {"outcome": "", "label": "all", "counts": totals}]


def running(jobs: QuerySet[Job]) -> QuerySet[Job]:
    return jobs.filter(stage__in=RUNNING).select_related("image", "submitted_by").order_by("held_at", "pk")


def waiting(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """Waiting jobs in queue order (those the scheduler has not placed yet last)."""
    return (
        jobs.filter(stage=Stage.SUBMIT)
        .select_related("image", "submitted_by")
        .order_by("queue_position", "submitted_at", "pk")
    )


def state_key(job: Job) -> str:
    """What the job page's live part shows of a job, as a short key: it changes when the part would."""
    parts = [job.stage, job.outcome, job.cancel_requested, job.queue_position, job.wait_reason, job.expected_start,
             job.attempt, job.held_at, job.started_at, job.finished_at]  # fmt: skip
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def progress(job: Job, now: datetime) -> tuple[int, int]:
    """(seconds run, time limit): a running job's elapsed time against its limit."""
    if job.started_at is None:
        return 0, job.time_limit_s
    return min(int((now - job.started_at).total_seconds()), job.time_limit_s), job.time_limit_s


@dataclass(frozen=True)
class Figures:
    queue_wait: timedelta | None
    run_time: timedelta | None
    cost: Decimal | None
    cpu_used: float | None  # cpu time used / cpu time held, 0..1
    memory_used: float | None  # peak memory / memory held, 0..1

    @property
    def over_asked(self) -> bool:
        return any(share is not None and share < OVER_ASKED_BELOW for share in (self.cpu_used, self.memory_used))


def figures(job: Job, records: list[Record] | None = None) -> Figures:
    """A job's waiting, run time, cost (over all its attempts) and efficiency (its last attempt)."""
    if records is None:
        records = getattr(job, "record_list", None)
        if records is None:
            records = list(job.records.order_by("sequence"))
    last = records[-1] if records else None
    cpu_used = memory_used = None
    if last is not None and last.held_seconds >= EFFICIENCY_AFTER_S:
        cpu_used = float(last.cpu_seconds) / (float(last.held_seconds) * max(last.cpus, 1))
        if last.memory_peak_mb is not None and last.memory_mb:
            memory_used = last.memory_peak_mb / last.memory_mb
    return Figures(
        queue_wait=job.held_at - job.submitted_at if job.held_at else None,
        run_time=job.finished_at - job.started_at if job.started_at and job.finished_at else None,
        cost=sum((r.cost for r in records), Decimal(0)) if records else None,
        cpu_used=cpu_used,
        memory_used=memory_used,
    )


def timeline(job: Job) -> list[dict]:
    """The five steps, each with when it was reached and how long the job stayed in the step before."""
    steps = job.steps()
    rows = []
    for i, (step, at) in enumerate(steps):
        took = None
        if i and at is not None and steps[i - 1][1] is not None:
            took = at - steps[i - 1][1]  # type: ignore[operator]
        rows.append({"step": step, "at": at, "took": took})
    return rows


def pool_now() -> dict[str, Any]:
    """The largest node, and the most a node can give now (beside the request's fields)."""
    nodes = [n for n in Node.objects.all() if n.state == Node.State.ACTIVE] or list(Node.objects.all())
    if not nodes:
        return {}
    free = free_capacity(nodes).values()
    return {
        "largest": {"cpus": max(n.cpus for n in nodes), "memory_mb": max(n.memory_mb for n in nodes),
                    "gpus": max(n.gpus for n in nodes)},
        "free": {"cpus": max(len(f.cpu_ids) for f in free), "memory_mb": max(f.memory_mb for f in free),
                 "gpus": max(len(f.gpu_ids) for f in free)},
    }  # fmt: skip
