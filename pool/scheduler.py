"""The pool's half of a scheduler pass (jobs.actions.schedule_pass): the nodes it may place on, the fair-share order."""

from datetime import datetime, timedelta

from django.db.models import Count

from accounting.fairshare import usage_now
from pool.models import Hold, Node
from pool.nodes import hold_off_passes
from pool.placement import Reason, Request, Running, Waiting, never_fits


def lock_pool() -> list[Node]:
    """Take the pool for one pass and return the nodes taking work (active, and proving for the probes pinned
    to them). Their rows are read, not locked: a heartbeat (a row update) never waits for a pass, and what
    changes the nodes a pass may use waits for it instead (pool.nodes.hold_off_passes)."""
    hold_off_passes()
    return list(Node.objects.filter(state__in=[Node.State.ACTIVE, Node.State.PROVING]).order_by("name"))


def running_holds(nodes: list[Node]) -> list[Running]:
    """The unreleased holds on these nodes, ending at the latest at the job's (or hold's) start plus its time limit."""
    rows = Hold.objects.filter(node__in=nodes, released_at__isnull=True).values_list(
        "node_id", "cpu_set", "memory_mb", "gpu_ids", "held_at", "job__started_at", "job__time_limit_s"
    )
    return [
        Running(node_id, cpu_set, memory_mb, gpu_ids, (started_at or held_at) + timedelta(seconds=time_limit_s))
        for node_id, cpu_set, memory_mb, gpu_ids, held_at, started_at, time_limit_s in rows
    ]


def team_usage(*, now: datetime) -> dict[int, float]:
    """Decayed core-seconds of past holds plus what running holds have accrued, so a team filling the pool waits."""
    usage = usage_now(now=now)
    # Counted by the database per team and start, so a pass reads a row per group, not every core list.
    active = (
        Hold.objects.filter(released_at__isnull=True)
        .values("job__team_id", "held_at")
        .annotate(held_cores=Count("cores"))
        .values_list("job__team_id", "held_cores", "held_at")
    )
    for team_id, cores, held_at in active:
        usage[team_id] = usage.get(team_id, 0.0) + cores * max(0.0, (now - held_at).total_seconds())
    return usage


def fair_share_order(waiting: list[Waiting], *, now: datetime) -> list[Waiting]:
    """The waiting jobs in the order they are served: the team's usage, then submit time, then rank (an
    array's tasks in index order)."""
    usage = team_usage(now=now)
    return sorted(waiting, key=lambda w: (usage.get(w.team_id, 0.0), w.submitted_at, w.rank, str(w.job_id)))


def split_impossible(waiting: list[Waiting]) -> tuple[list[Waiting], list[tuple[Waiting, Reason]]]:
    """(the jobs some registered node could hold, [(job, why no node ever could)])."""
    nodes = list(Node.objects.all())
    verdicts: dict[Request, Reason | None] = {}
    kept, impossible = [], []
    for w in waiting:
        if w.request not in verdicts:
            verdicts[w.request] = never_fits(w.request, nodes)
        why = verdicts[w.request]
        if why:
            impossible.append((w, why))
        else:
            kept.append(w)
    return kept, impossible
