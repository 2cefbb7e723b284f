"""Utilisation of the pool: held over available core-seconds, per node and overall, in UTC hours or days."""

import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from functools import cached_property

from django.db.models import Count, F, QuerySet, Sum
from django.db.models.functions import Trunc

from accounting.models import Record
from core.charts import Chart, bar_chart
from pool.models import Hold, Node, NodeStateChange

STEPS = {"hour": timedelta(hours=1), "day": timedelta(days=1)}
MAX_BUCKETS = 24 * 400  # a report of more is refused (ask for days, or a shorter range)


def align(at: datetime, step: str) -> datetime:
    at = at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return at if step == "hour" else at.replace(hour=0)


@dataclass
class Cell:
    held: float = 0.0
    available: float = 0.0
    drained: float = 0.0

    def as_dict(self) -> dict[str, float | str | None]:
        return {
            "held_core_seconds": round(self.held, 3),
            "available_core_seconds": round(self.available, 3),
            "drained_core_seconds": round(self.drained, 3),
            "utilisation": ratio(self.held, self.available),
        }


def ratio(held: float, available: float) -> str | None:
    if available <= 0:
        return None
    return format(Decimal(held / available).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP), "f")


@dataclass
class Report:
    since: datetime
    until: datetime
    step: str
    starts: list[datetime]
    cells: dict[tuple[str, int], Cell] = field(default_factory=dict)  # (node, bucket) → cell

    def cell(self, node: str, bucket: int) -> Cell:
        return self.cells.setdefault((node, bucket), Cell())

    def nodes(self) -> list[str]:
        return sorted({node for node, _ in self.cells})

    @cached_property
    def sums(self) -> tuple[dict[str, Cell], dict[int, Cell], Cell]:
        per_node: dict[str, Cell] = defaultdict(Cell)
        per_bucket: dict[int, Cell] = defaultdict(Cell)
        total = Cell()
        for (node, bucket), c in self.cells.items():
            for into in (per_node[node], per_bucket[bucket], total):
                into.held += c.held
                into.available += c.available
                into.drained += c.drained
        return per_node, per_bucket, total

    def chart(self) -> Chart:
        """Utilisation per bucket in %, against 100 %; a bucket with nothing available has no bar."""
        _, per_bucket, _ = self.sums
        hourly = self.step == "hour"
        points = [
            (
                start.strftime("%m-%d %H:%M" if hourly else "%m-%d"),
                c.held / c.available if (c := per_bucket[i]).available > 0 else math.nan,
            )
            for i, start in enumerate(self.starts)
        ]
        every = max(1, len(points) // (6 if hourly else 10))
        title = f"Utilisation per {self.step}"
        return bar_chart(points, title=title, unit="%", share=True, limit=1.0, every=every)

    def as_dict(self) -> dict:
        per_node, per_bucket, total = self.sums
        return {
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "step": self.step,
            "overall": total.as_dict(),
            "nodes": [{"node": n, **per_node[n].as_dict()} for n in sorted(per_node)],
            "buckets": [
                {
                    "start": start.isoformat(),
                    **per_bucket[i].as_dict(),
                    "nodes": {n: self.cells[(n, i)].as_dict() for n in self.nodes() if (n, i) in self.cells},
                }
                for i, start in enumerate(self.starts)
            ],
        }


def _spread(report: Report, start: datetime, end: datetime) -> Iterator[tuple[int, float]]:
    """(bucket, seconds) of [start, end) in each bucket of the report."""
    start, end = max(start, report.since), min(end, report.until)
    if end <= start:
        return
    step = STEPS[report.step]
    first = int((start - report.since) / step)
    for i in range(first, len(report.starts)):
        bucket_start = report.starts[i]
        bucket_end = bucket_start + step
        if bucket_start >= end:
            break
        seconds = (min(end, bucket_end) - max(start, bucket_start)).total_seconds()
        if seconds > 0:
            yield i, seconds


def current_end(now: datetime, step: str) -> datetime:
    """The end of the hour or day `now` is in: a report up to it includes the bucket under way."""
    return align(now, step) + STEPS[step]


def utilisation(*, since: datetime, until: datetime, step: str, now: datetime) -> Report:
    """The report of [since, until) by `step` ("hour" or "day"), up to the bucket `now` is in at most (a
    bucket yet to come has nothing to say); raises ValueError on a bad range."""
    if step not in STEPS:
        raise ValueError(f"step is one of {', '.join(STEPS)}")
    since, until = align(since, step), align(until, step)
    if until <= since:
        until = since + STEPS[step]
    until = max(since, min(until, current_end(now, step)))
    count = int((until - since) / STEPS[step])
    if count > MAX_BUCKETS:
        raise ValueError(f"at most {MAX_BUCKETS} buckets: ask for days, or a shorter range")
    report = Report(since, until, step, [since + i * STEPS[step] for i in range(count)])
    _available(report, now=now)
    for (node, i), seconds in held_core_seconds(since=since, count=count, step=step, now=now).items():
        report.cell(node, i).held += seconds
    return report


def _available(report: Report, *, now: datetime) -> None:
    """A node's current cores while active or draining (a draining node still lends its holds' cores)."""
    nodes = list(Node.objects.filter(registered_at__lt=report.until))
    changes: dict[int, list[tuple[datetime, str]]] = defaultdict(list)
    for node_id, at, to_state in (
        NodeStateChange.objects.filter(node__in=nodes, at__lt=report.until)
        .order_by("at", "id")
        .values_list("node_id", "at", "to_state")
    ):
        changes[node_id].append((at, to_state))
    for node in nodes:
        cores = len(node.cpu_ids)
        state, since = str(Node.State.ACTIVE), node.registered_at
        for at, to_state in [*changes[node.pk], (min(now, report.until), "")]:
            if at > since:
                for i, seconds in _spread(report, since, at):
                    c = report.cell(node.name, i)
                    if state != Node.State.OFFLINE:
                        c.available += seconds * cores
                    if state == Node.State.DRAINING:
                        c.drained += seconds * cores
            state, since = to_state, max(since, at)


def held_core_seconds(
    *, since: datetime, count: int, step: str, now: datetime, records: QuerySet[Record] | None = None
) -> dict[tuple[str, int], float]:
    """Held core-seconds per (node, bucket) of the records (of `records` alone, if given) and unreleased holds;
    read grouped by node, cores, first and last bucket, so a busy month is a few thousand rows, not one a record."""
    width = STEPS[step]
    until = since + count * width
    groups = (
        (Record.objects.all() if records is None else records)
        .filter(released_at__gt=since, held_at__lt=until)
        .filter(released_at__gt=F("held_at"))
        .annotate(a=Trunc("held_at", step, tzinfo=UTC), z=Trunc("released_at", step, tzinfo=UTC))
        .values("node", "a", "z", "cpus")
        .annotate(n=Count("pk"), into_a=Sum(F("held_at") - F("a")), into_z=Sum(F("released_at") - F("z")))
        .order_by()
        .values_list("node", "a", "z", "cpus", "n", "into_a", "into_z")
    )
    spans = [
        (node, a, z, cpus * n, cpus * into_a.total_seconds(), cpus * into_z.total_seconds())
        for node, a, z, cpus, n, into_a, into_z in groups
    ]
    running = Hold.objects.filter(released_at__isnull=True, held_at__lt=min(until, now))
    running = running if records is None else running.none()
    for node, cpu_set, held_at in running.values_list("node__name", "cpu_set", "held_at"):
        a, z, cpus = align(held_at, step), align(now, step), len(cpu_set)
        spans.append((node, a, z, cpus, cpus * (held_at - a).total_seconds(), cpus * (now - z).total_seconds()))
    held: dict[tuple[str, int], float] = defaultdict(float)
    for node, a, z, cpus, into_a, into_z in spans:
        first, last = int((a - since) / width), int((z - since) / width)
        for i in range(max(first, 0), min(last, count - 1) + 1):
            held[(node, i)] += (into_z if i == last else cpus * width.total_seconds()) - (into_a if i == first else 0)
    return dict(held)
