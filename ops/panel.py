"""What the operator panel shows, read in a fixed number of queries whatever the number of jobs:
each node's capacity (used and free), the holds with their meters running, the queue, lost nodes,
recent failures of every team, usage by team, and the pool's utilisation over time."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import Count, F, Q, Sum
from django.db.models.functions import Coalesce

from accounting.meter import cost_of
from accounting.models import Record
from jobs.models import Job, Outcome, Stage
from pool.models import Hold, Node, NodeStateChange
from pool.nodes import free_capacity

FAILED = [Outcome.FAILED, Outcome.TIMED_OUT, Outcome.OUT_OF_MEMORY, Outcome.NODE_LOST]
LISTED = 50  # rows of each list shown; the count of all of them is shown beside


@dataclass
class Meter:
    """A bar: used of total, in a unit."""

    used: int
    total: int
    unit: str

    @property
    def free(self) -> int:
        return self.total - self.used

    @property
    def percent(self) -> int:
        return round(100 * self.used / self.total) if self.total else 0


@dataclass
class NodeRow:
    node: Node
    cores: Meter
    memory: Meter
    gpus: Meter
    heartbeat_age_s: int
    holds: int

    @property
    def meters(self) -> list[Meter]:
        return [self.cores, self.memory, self.gpus]


def node_rows(*, now: datetime) -> list[NodeRow]:
    """Every node with its capacity used and free (4 queries: the nodes, then pool.nodes.free_capacity)."""
    nodes: list[Node] = list(Node.objects.select_related("state_changed_by").annotate(active_holds=_active_holds()))
    free = free_capacity(nodes)
    rows = []
    for node in nodes:
        left = free[node.pk]
        rows.append(
            NodeRow(
                node=node,
                cores=Meter(node.cpus - len(left.cpu_ids), node.cpus, "cores"),
                memory=Meter(node.memory_mb - left.memory_mb, node.memory_mb, "MB"),
                gpus=Meter(node.gpus - len(left.gpu_ids), node.gpus, "gpus"),
                heartbeat_age_s=max(0, int((now - node.last_heartbeat).total_seconds())),
                holds=getattr(node, "active_holds", 0),
            )
        )
    return rows


def _active_holds() -> Count:
    return Count("holds", filter=Q(holds__released_at__isnull=True))


@dataclass
class Running:
    hold: Hold
    elapsed_s: int
    cost_so_far: Decimal


def running_meters(*, now: datetime, limit: int = LISTED) -> tuple[list[Running], int]:
    """The active holds, oldest first, with their meters as they stand now (the cost the record
    would say if the hold were released now); and how many there are in all."""
    active = Hold.objects.filter(released_at__isnull=True)
    holds = list(active.select_related("job__team", "node").order_by("held_at")[:limit])
    running = []
    for hold in holds:
        elapsed = max(Decimal(0), Decimal((now - hold.held_at).total_seconds()))
        cost = cost_of(cpus=len(hold.cpu_set), memory_mb=hold.memory_mb, gpus=len(hold.gpu_ids), held_seconds=elapsed)
        running.append(Running(hold=hold, elapsed_s=int(elapsed), cost_so_far=cost))
    return running, active.count() if len(holds) == limit else len(holds)


def queue(*, limit: int = LISTED) -> tuple[list[Job], int]:
    """The waiting jobs in the order of the last scheduler pass (its position; new ones last)."""
    waiting = Job.objects.filter(stage=Stage.SUBMIT)
    jobs = list(
        waiting.select_related("team", "submitted_by", "image").order_by(
            F("queue_position").asc(nulls_last=True), "submitted_at"
        )[:limit]
    )
    return jobs, waiting.count() if len(jobs) == limit else len(jobs)


def reserved(jobs: list[Job]) -> list[Job]:
    return [job for job in jobs if job.expected_start is not None]


def lost_nodes(*, now: datetime, days: int = 7) -> list[NodeStateChange]:
    """Nodes declared lost in the last `days` (the reaper's history rows), newest first."""
    return list(
        NodeStateChange.objects.filter(to_state=Node.State.OFFLINE, by__isnull=True, at__gte=now - timedelta(days=days))
        .select_related("node")
        .order_by("-at")[:LISTED]
    )


def recent_failures(*, now: datetime, hours: int = 24, limit: int = LISTED) -> tuple[list[Job], int]:
    """Jobs of every team that failed (failed, timed out, out of memory, node lost) in the last `hours`."""
    failed = Job.objects.filter(stage=Stage.RELEASE, outcome__in=FAILED, released_at__gte=now - timedelta(hours=hours))
    jobs = list(failed.select_related("team", "submitted_by").order_by("-released_at")[:limit])
    return jobs, failed.count() if len(jobs) == limit else len(jobs)


@dataclass
class TeamUsageRow:
    team: str
    cores_now: int = 0
    memory_mb_now: int = 0
    holds_now: int = 0
    core_hours_30d: Decimal = Decimal(0)
    cost_30d: Decimal = Decimal(0)
    jobs_30d: int = 0


def usage_by_team(*, now: datetime, days: int = 30) -> list[TeamUsageRow]:
    """What each team holds now (its active holds) and what it used over the last `days` (its
    records, aggregated in the database): two GROUP BY queries."""
    rows: dict[str, TeamUsageRow] = {}
    holding = (
        Hold.objects.filter(released_at__isnull=True)
        .values("job__team__slug")
        .annotate(holds=Count("id"), memory=Sum("memory_mb"), held_cores=Sum("job__cpus"))
    )
    for row in holding:
        slug = row["job__team__slug"]
        rows[slug] = TeamUsageRow(slug, cores_now=row["held_cores"] or 0, memory_mb_now=row["memory"] or 0,
                                  holds_now=row["holds"])  # fmt: skip
    used = (
        Record.objects.filter(released_at__gte=now - timedelta(days=days))
        .values("team__slug")
        .annotate(
            core_seconds=Coalesce(Sum(F("held_seconds") * F("cpus")), Decimal(0)),
            cost=Coalesce(Sum("cost"), Decimal(0)),
            jobs=Count("job_id", distinct=True),
        )
    )
    for row in used:
        slug = row["team__slug"]
        usage = rows.setdefault(slug, TeamUsageRow(slug))
        usage.core_hours_30d = (Decimal(row["core_seconds"]) / 3600).quantize(Decimal("0.1"))
        usage.cost_30d, usage.jobs_30d = row["cost"], row["jobs"]
    return sorted(rows.values(), key=lambda r: (-r.cores_now, -r.cost_30d, r.team))
