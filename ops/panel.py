"""What the operator panel shows, in a fixed number of queries whatever the number of jobs."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.db.models import Count, F, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.urls import reverse

from accounting.models import Record
from accounting.rates import RateBook, core_hours, record_core_seconds
from core import formats
from core.charts import Chart, bar_chart
from isolation.checks import PROBE_JOBS
from jobs.models import Job, Outcome
from jobs.web.upstreams import read_names
from pool.models import Hold, Node, NodeStateChange
from pool.nodes import free_capacity
from pool.utilisation import align, held_core_seconds
from teams.models import Team

FAILED = [Outcome.FAILED, Outcome.TIMED_OUT, Outcome.OUT_OF_MEMORY, Outcome.NODE_LOST]
# The only columns the panel's lists load: a job's command and env stay in the database.
HOLD_FIELDS = ["job_id", "node_id", "cpu_set", "memory_mb", "gpu_ids", "held_at"]
QUEUE_FIELDS = ["team_id", "name", "stage", "cpus", "memory_mb", "gpus", "submitted_at", "queue_position",
                "wait_reason", "expected_start"]  # fmt: skip
FAILURE_FIELDS = ["team_id", "submitted_by_id", "name", "stage", "outcome", "exit_code", "reason", "released_at"]
LISTED = 12  # rows of each list shown, the count of all beside


def _head(rows: QuerySet[Any], limit: int = LISTED) -> tuple[list[Any], int]:
    """The first `limit` rows, and how many there are in all (counted only when there may be more)."""
    head = list(rows[:limit])
    return head, rows.count() if len(head) == limit else len(head)


@dataclass
class Meter:
    used: int
    total: int
    unit: str
    dom_id: str = ""  # the id of its <meter>, which its label names

    @property
    def text(self) -> str:
        return f"{self.unit}: {self.used} used, {self.total - self.used} free of {self.total}"


@dataclass
class NodeRow:
    """A node's card with its words made here, so the partial polled every few seconds renders plain values."""

    name: str
    state: str
    note: str  # heartbeat age, holds, who changed its state and when
    meters: list[Meter]
    url: str  # its page; its drain and resume are below it
    reason: str = ""  # why it is draining (an operator's words, a failed probe), from its last state change
    features: str = ""  # what a job's constraint may ask of it, comma-separated


def node_rows(*, now: datetime, nodes: QuerySet[Node] | None = None) -> list[NodeRow]:
    """Every node (or those of `nodes`) with its capacity used and free, in 5 queries."""
    nodes_read = list((Node.objects.all() if nodes is None else nodes).select_related("state_changed_by"))
    free = free_capacity(nodes_read)
    active = Hold.objects.filter(released_at__isnull=True).order_by()
    if nodes is not None:
        active = active.filter(node__in=[n.pk for n in nodes_read])
    holds = dict(active.values("node_id").annotate(n=Count("id")).values_list("node_id", "n"))
    page = reverse("ops:node", args=["-"])  # a node's name is a slug: put in place of the "-", not reversed each
    rows = []
    for node in nodes_read:
        left, count = free[node.pk], formats.count(holds.get(node.pk, 0), "hold")
        note = f"heartbeat {max(0, int((now - node.last_heartbeat).total_seconds()))} s ago · {count}"
        if node.state_changed_at:
            note += f" · {node.state} since {formats.moment(node.state_changed_at)}"
            if node.state_changed_by:
                note += f" by {node.state_changed_by.username}"
        meters = [
            Meter(node.cpus - len(left.cpu_ids), node.cpus, "cores", f"{node.name}-cores"),
            Meter(node.memory_mb - left.memory_mb, node.memory_mb, "MB", f"{node.name}-MB"),
            Meter(node.gpus - len(left.gpu_ids), node.gpus, "gpus", f"{node.name}-gpus"),
        ]
        reason = (
            node.state_reason if node.state in (Node.State.DRAINING, Node.State.PROVING) else ""
        )  # a lost card says why itself
        url = page.replace("/-/", f"/{node.name}/")
        meters = [m for m in meters if m.total]
        rows.append(NodeRow(node.name, node.state, note, meters, url, reason, ", ".join(node.features)))
    return rows


def jobs_running_on(node: Node) -> int:
    return Hold.objects.filter(node=node, released_at__isnull=True).count()


def drain_consequence(running: int) -> str:
    if running == 0:
        return "No job runs there now; no new job starts there"
    if running == 1:
        return "1 job runs there now; it finishes first, no new job starts there"
    return f"{running} jobs run there now; they finish first, no new job starts there"


@dataclass
class NodePage:
    node: Node
    rows: list[NodeRow]  # its card, as the panel's
    running: list[Hold]
    history: list[NodeStateChange]
    more_history: bool  # older changes than those shown (the admin lists them all)


HISTORY_SHOWN = 50


def node_page(node: Node, *, now: datetime) -> NodePage:
    """The node's page in a fixed number of queries: its card, its active holds, its last state changes."""
    rows = node_rows(now=now, nodes=Node.objects.filter(pk=node.pk))
    running = list(
        Hold.objects.filter(node=node, released_at__isnull=True)
        .select_related("job__team")
        .only(*HOLD_FIELDS, "job__name", "job__stage", "job__team__slug")
        .order_by("held_at")
    )
    history = list(node.state_changes.select_related("by").order_by("-at", "-id")[: HISTORY_SHOWN + 1])
    return NodePage(node, rows, running, history[:HISTORY_SHOWN], more_history=len(history) > HISTORY_SHOWN)


@dataclass
class Running:
    hold: Hold
    elapsed_s: int
    cost_so_far: Decimal


def running_meters(*, now: datetime) -> tuple[list[Running], int]:
    """The active holds, oldest first, with the cost their records would say now; and their count."""
    holds, count = _head(
        Hold.objects.filter(released_at__isnull=True)
        .select_related("job__team", "job__image", "node")
        .only(*HOLD_FIELDS, "job__name", "job__stage", "job__team__slug", "job__image__name", "node__name")
        .order_by("held_at")
    )
    running = []
    book = RateBook.load()  # the meter runs at the rate in force at RENT, as the record will
    for hold in holds:
        elapsed = max(Decimal(0), Decimal((now - hold.held_at).total_seconds()))
        rate = book.rate_in_force(hold.held_at, image=hold.job.image.name)
        cost = rate.cost(cpus=len(hold.cpu_set), memory_mb=hold.memory_mb, gpus=len(hold.gpu_ids), held_seconds=elapsed)
        running.append(Running(hold=hold, elapsed_s=int(elapsed), cost_so_far=cost))
    return running, count


def queue() -> tuple[list[Job], int]:
    """The waiting jobs in the last pass's order (new ones last) and their count, their reasons' names read."""
    head, count = _head(
        Job.objects.waiting()
        .select_related("team")
        .only(*QUEUE_FIELDS, "team__slug")
        .order_by(F("queue_position").asc(nulls_last=True), "submitted_at")
    )
    read_names(head, "wait_reason")
    return head, count


def lost_nodes(*, now: datetime, days: int = 7) -> list[NodeStateChange]:
    return list(
        NodeStateChange.objects.filter(to_state=Node.State.OFFLINE, by__isnull=True, at__gte=now - timedelta(days=days))
        .select_related("node")
        .order_by("-at")[:LISTED]
    )


def recent_failures(*, now: datetime, hours: int = 24) -> tuple[list[Job], int]:
    """Jobs that failed in the last `hours`, newest first, and their count; not the isolation probes (counted apart)."""
    head, count = _head(
        Job.objects.ended()
        .filter(outcome__in=FAILED, released_at__gte=now - timedelta(hours=hours))
        .exclude(PROBE_JOBS)
        .select_related("team", "submitted_by")
        .only(*FAILURE_FIELDS, "team__slug", "submitted_by__username")
        .order_by("-released_at")
    )
    read_names(head, "reason")
    return head, count


def _team_sums(since: datetime, until: datetime | None) -> dict[int, tuple[Decimal, Decimal, int]]:
    """Held core-seconds, cost and records of each team released in [since, until), in one GROUP BY."""
    records = Record.objects.filter(released_at__gte=since).order_by()
    if until is not None:
        records = records.filter(released_at__lt=until)
    sums = records.values("team_id").annotate(
        core_seconds=Coalesce(Sum(record_core_seconds()), Decimal(0)),
        cost=Coalesce(Sum("cost"), Decimal(0)),
        records=Count("id"),
    )
    return {row["team_id"]: (row["core_seconds"], row["cost"], row["records"]) for row in sums}


@dataclass
class TeamUsageRow:
    team: str
    cores_now: int = 0
    memory_mb_now: int = 0
    holds_now: int = 0
    core_hours_30d: Decimal = Decimal(0)
    cost_30d: Decimal = Decimal(0)
    records_30d: int = 0  # one per hold: a job retried after its node was lost has several


def usage_by_team(*, now: datetime, days: int = 30) -> list[TeamUsageRow]:
    """What each team holds now and used since midnight (UTC) `days` days ago, the sums before yesterday cached."""
    rows: dict[str, TeamUsageRow] = {}
    slugs = dict(Team.objects.values_list("pk", "slug"))
    holding = (
        Hold.objects.filter(released_at__isnull=True)
        .values("job__team_id")
        .annotate(holds=Count("id"), memory=Sum("memory_mb"), held_cores=Sum("job__cpus"))
        .order_by()
    )
    for row in holding:
        slug = slugs[row["job__team_id"]]
        rows[slug] = TeamUsageRow(slug, cores_now=row["held_cores"] or 0, memory_mb_now=row["memory"] or 0,
                                  holds_now=row["holds"])  # fmt: skip
    today = align(now, "day")
    since, closed_until = today - timedelta(days=days), today - timedelta(days=1)
    key = f"ops:team-usage:{connection.settings_dict['NAME']}:{since:%Y%m%d}:{closed_until:%Y%m%d}"
    closed = cache.get(key)
    if closed is None:
        closed = _team_sums(since, closed_until)
        cache.set(key, closed, timeout=2 * 86400)
    for sums in (closed, _team_sums(closed_until, None)):
        for team_id, (core_seconds, cost, records) in sums.items():
            usage = rows.setdefault(slugs[team_id], TeamUsageRow(slugs[team_id]))
            usage.core_hours_30d += core_hours(core_seconds)
            usage.cost_30d += cost
            usage.records_30d += records
    for usage in rows.values():
        usage.core_hours_30d = usage.core_hours_30d.quantize(Decimal("0.1"))
    return sorted(rows.values(), key=lambda r: (-r.cores_now, -r.cost_30d, r.team))


def utilisation(*, now: datetime, days: int = 7, bucket_hours: int = 6) -> Chart:
    """The average cores held in each bucket of the last `days`, those ended over a day ago cached for the hour."""
    bucket = timedelta(hours=bucket_hours)
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    start = end - timedelta(days=days)
    count = int((end - start) / bucket)
    closed = max(0, min(count, int((now - timedelta(days=1) - start) / bucket)))
    key = f"ops:cores-held:{connection.settings_dict['NAME']}:{start:%Y%m%d%H}:{bucket_hours}:{closed}"
    past = cache.get(key)
    if past is None:
        cores = _cores_held(start=start, count=count, bucket_hours=bucket_hours, now=now)
        cache.set(key, cores[:closed], timeout=2 * 3600)
    else:
        cores = past + _cores_held(
            start=start + closed * bucket, count=count - closed, bucket_hours=bucket_hours, now=now
        )
    capacity = sum(len(ids) for ids in Node.objects.exclude(state=Node.State.OFFLINE).values_list("cpu_ids", flat=True))
    points = [((start + i * bucket).strftime("%m-%d %H:%M"), cores[i]) for i in range(count)]
    every = max(1, 24 // bucket_hours)  # a label a day
    return bar_chart(points, title="Cores in use", unit="cores", limit=capacity or None, every=every)


def _cores_held(*, start: datetime, count: int, bucket_hours: int, now: datetime) -> list[float]:
    """The average held cores in each of `count` buckets of `bucket_hours` from `start`, on the hour."""
    if count <= 0:
        return []
    held = held_core_seconds(since=start, count=count * bucket_hours, step="hour", now=now)
    seconds = [0.0] * count
    for (_node, hour), core_seconds in held.items():
        seconds[hour // bucket_hours] += core_seconds
    return [s / (bucket_hours * 3600) for s in seconds]
