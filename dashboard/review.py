"""The morning review: what ended since a time (failures first), counts by outcome, what runs and waits now."""

from datetime import datetime, time, timedelta, tzinfo

from django.db.models import Case, Count, IntegerField, OuterRef, Prefetch, Q, QuerySet, Subquery, Sum, Value, When
from django.db.models.functions import Coalesce

from accounting.models import Record
from jobs.models import Job, Outcome, OutputFile, Stage

# The run did not do its work; a cancel was someone's choice.
FAILURES = [Outcome.FAILED, Outcome.TIMED_OUT, Outcome.OUT_OF_MEMORY, Outcome.NODE_LOST, Outcome.REJECTED]
RUNNING = [Stage.RENT, Stage.RUN, Stage.OUTPUT]
WINDOWS = [("24 h", timedelta(days=1)), ("7 d", timedelta(days=7)), ("30 d", timedelta(days=30))]


def default_since(now: datetime, zone: tzinfo) -> datetime:
    """18:00 the day before, in the team's time zone: "what happened overnight"."""
    day = now.astimezone(zone).date() - timedelta(days=1)
    return datetime.combine(day, time(18), tzinfo=zone)


def with_figures(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """Jobs with their outputs' count and size and their records, in a fixed number of queries."""
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
    """Per outcome, how many jobs ended with it over each window, in one query grouped by outcome."""
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


def progress(job: Job, now: datetime) -> tuple[int, int]:
    """(seconds run, time limit): a running job's elapsed time against its limit."""
    if job.started_at is None:
        return 0, job.time_limit_s
    return min(int((now - job.started_at).total_seconds()), job.time_limit_s), job.time_limit_s
