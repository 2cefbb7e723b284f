"""Utilisation of the pool: held core-seconds over available core-seconds, per node and overall, by
hour or day.

- Held: from the records (each hold's held_at to released_at, times its cores), and the holds not
  released yet (up to now), cut at bucket edges.
- Available: each node's cores, from its registration on, while it is active or draining (a draining
  node still lends the cores its holds keep), from its history of state changes (NodeStateChange);
  offline time is not available. Time drained is reported apart (`drained_core_seconds`), so an
  operator sees what was withdrawn. A node's cores are its current ones (changes are not kept).
Buckets are aligned in UTC (hours, days), `[since, until)`.
"""

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.db import connection

from accounting.models import Record
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

    def as_dict(self) -> dict:
        per_node: dict[str, Cell] = defaultdict(Cell)
        per_bucket: dict[int, Cell] = defaultdict(Cell)
        total = Cell()
        for (node, bucket), c in self.cells.items():
            for into in (per_node[node], per_bucket[bucket], total):
                into.held += c.held
                into.available += c.available
                into.drained += c.drained
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


def utilisation(*, since: datetime, until: datetime, step: str, now: datetime) -> Report:
    """The report of [since, until) by `step` ("hour" or "day"); raises ValueError on a bad range."""
    if step not in STEPS:
        raise ValueError(f"step is one of {', '.join(STEPS)}")
    since, until = align(since, step), align(until, step)
    if until <= since:
        until = since + STEPS[step]
    count = int((until - since) / STEPS[step])
    if count > MAX_BUCKETS:
        raise ValueError(f"at most {MAX_BUCKETS} buckets: ask for days, or a shorter range")
    report = Report(since, until, step, [since + i * STEPS[step] for i in range(count)])
    _available(report, now=now)
    _held(report, now=now)
    return report


def _available(report: Report, *, now: datetime) -> None:
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


def _held(report: Report, *, now: datetime) -> None:
    if connection.vendor == "postgresql":
        _records_held_by_postgresql(report)
    else:
        _records_held(report)
    holds = Hold.objects.filter(released_at__isnull=True, held_at__lt=report.until)
    for node, cpu_set, held_at in holds.values_list("node__name", "cpu_set", "held_at"):
        for i, seconds in _spread(report, held_at, now):
            report.cell(node, i).held += seconds * len(cpu_set)


def _records_held(report: Report) -> None:
    """The records' held core-seconds, cut at bucket edges in Python (any database)."""
    records = Record.objects.filter(released_at__gt=report.since, held_at__lt=report.until).values_list(
        "node", "cpus", "held_at", "released_at"
    )
    for node, cpus, held_at, released_at in records.iterator(chunk_size=10_000):
        for i, seconds in _spread(report, held_at, released_at):
            report.cell(node, i).held += seconds * cpus


# The same sums made by PostgreSQL: each record is cut into the buckets it overlaps (date_bin aligns
# them to the report's start), and only (node, bucket, sum) rows come back: a month of a busy pool
# is tens of thousands of records, which Python would read and cut one by one.
_HELD_SQL = """
SELECT r.node, b.start, SUM(r.cpus * EXTRACT(EPOCH FROM LEAST(r.released_at, b.start + %(step)s)
                                             - GREATEST(r.held_at, b.start)))
FROM accounting_record r
CROSS JOIN LATERAL generate_series(
    date_bin(%(step)s, GREATEST(r.held_at, %(since)s), %(since)s),
    LEAST(r.released_at, %(until)s) - interval '1 microsecond',
    %(step)s
) AS b(start)
WHERE tstzrange(r.held_at, GREATEST(r.held_at, r.released_at)) && tstzrange(%(since)s, %(until)s)
    AND r.released_at > %(since)s AND r.held_at < %(until)s
GROUP BY r.node, b.start
"""


def _records_held_by_postgresql(report: Report) -> None:
    step = STEPS[report.step]
    with connection.cursor() as cursor:
        params: dict[str, Any] = {"step": step, "since": report.since, "until": report.until}
        cursor.execute(_HELD_SQL, params)
        for node, start, seconds in cursor.fetchall():
            report.cell(node, int((start - report.since) / step)).held += float(seconds)
