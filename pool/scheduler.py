"""The pool's half of a scheduler pass (jobs.lifecycle.actions.schedule_pass): the nodes it may place on, the
fair-share order."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone

from accounting.fairshare import usage_now
from pool.features import Constraint
from pool.models import Hold, MaintenanceWindow, Node, Queue, with_team_ids
from pool.nodes import hold_off_passes
from pool.placement.backfill import never_fits, serve_order
from pool.placement.reasons import Reason
from pool.placement.types import FreeCapacity, QueueCaps, Request, Running, Waiting, Window
from pool.preemption import preemptable
from pool.windows import kept_for_maintenance


def lock_pool(*, now: datetime | None = None) -> list[Node]:
    """Take the pool for one pass: the nodes taking work, and those draining for a window under way (so a job
    waiting for them says so); read, not locked (pool.nodes.hold_off_passes)."""
    hold_off_passes()
    taking = Q(state__in=[Node.State.ACTIVE, Node.State.PROVING])
    return list(Node.objects.filter(taking | kept_for_maintenance(now=now or timezone.now())).order_by("name"))


def unreleased_holds(nodes: list[Node]) -> list[tuple[Any, ...]]:
    """The unreleased holds' rows: read once, they give a pass its running holds and free capacity."""
    return list(
        Hold.objects.filter(node__in=nodes, released_at__isnull=True).values_list(
            "node_id", "cpu_set", "memory_mb", "gpu_ids", "held_at", "job__started_at", "job__time_limit_s",
            "job_id", "job__team_id", "job__queue_id", "job__preemptable", "job__preempted_by_id", "job__preemptions",
        )
    )  # fmt: skip


def running_holds(
    nodes: list[Node], queues: "Queues | None" = None, *, now: datetime | None = None,
    held: list[tuple[Any, ...]] | None = None,
) -> list[Running]:  # fmt: skip
    """The unreleased holds, ending at their start plus time limit, a preempted job's by its grace time (so its
    preemptor is reserved on its compute, not a lower job backfilled there to be preempted in turn)."""
    rows = held if held is not None else unreleased_holds(nodes)
    queues = queues or Queues.read()
    stopped_by = (now or timezone.now()) + timedelta(seconds=settings.E31_PREEMPT_GRACE_S)
    running = []
    for node_id, cpu_set, memory_mb, gpu_ids, held_at, started_at, limit_s, job_id, team_id, queue_id, \
            declared, preempted_by, preemptions in rows:  # fmt: skip
        end = (started_at or held_at) + timedelta(seconds=limit_s)
        if preempted_by is not None:
            end = min(end, stopped_by)
        queue = queues.of(queue_id)
        running.append(Running(
            node_id, cpu_set, memory_mb, gpu_ids, end, job_id=job_id, team_id=team_id,
            queue_id=queue.pk if queue else None, priority=queue.priority if queue else 0,
            preemptable=preemptable(declared=declared, queue=queue, preemptions=preemptions),
            started_at=started_at or held_at,
        ))  # fmt: skip
    return running


def free_on(nodes: list[Node], running: list[Running]) -> dict[int, FreeCapacity]:
    """Free cores, memory and gpus of each node: what it lends less what its running holds take, as
    pool.nodes.free_capacity reads them from the held devices (whose rows go with a hold's release)."""
    taken: dict[int, tuple[set[int], int, set[str]]] = {n.pk: (set(), 0, set()) for n in nodes}
    for r in running:
        cores, memory_mb, gpus = taken[r.node_id]
        taken[r.node_id] = (cores | set(r.cpu_ids), memory_mb + r.memory_mb, gpus | set(r.gpu_ids))
    return {
        n.pk: FreeCapacity(
            cpu_ids=[c for c in n.cpu_ids if c not in taken[n.pk][0]],
            memory_mb=n.memory_mb - taken[n.pk][1],
            gpu_ids=[g for g in n.gpu_ids if g not in taken[n.pk][2]],
        )
        for n in nodes
    }


@dataclass(frozen=True)
class Queues:
    """Every queue, read once a pass; a job with no queue (made before queues) is served as the default's."""

    by_id: dict[int, Queue]

    @classmethod
    def read(cls) -> "Queues":
        # With the teams each names: a preempting queue preempts for those alone (Queue.preempts_for).
        return cls({q.pk: q for q in with_team_ids(Queue.objects.all())})

    @cached_property  # asked for every job with no queue, every pass
    def default(self) -> Queue | None:
        return next((q for q in self.by_id.values() if q.is_default), None)

    def of(self, queue_id: int | None) -> Queue | None:
        return self.by_id.get(queue_id) if queue_id is not None else self.default

    def caps(self) -> dict[int, QueueCaps]:
        return {
            q.pk: QueueCaps(q.name, q.max_running_cores_per_team, q.max_running_jobs_per_team)
            for q in self.by_id.values()
            if q.max_running_cores_per_team is not None or q.max_running_jobs_per_team is not None
        }


def windows_ahead(nodes: list[Node], *, now: datetime) -> dict[int, list[Window]]:
    """The maintenance windows not over yet on each of these nodes (a window naming no node is on all)."""
    found: dict[int, list[Window]] = {}
    ids = {n.pk for n in nodes}
    for window in MaintenanceWindow.objects.filter(ends_at__gt=now).prefetch_related("nodes"):
        seen = Window(window.starts_at, window.ends_at, window.reason)
        on = [n.pk for n in window.nodes.all()] or ids
        for pk in on:
            if pk in ids:
                found.setdefault(pk, []).append(seen)
    return found


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
    return serve_order(waiting, team_usage(now=now), now=now, max_wait_s=settings.E31_FAIRSHARE_MAX_WAIT_S)


def split_impossible(waiting: list[Waiting]) -> tuple[list[Waiting], list[tuple[Waiting, Reason]]]:
    """(the jobs some registered node could hold, [(job, why no node ever could)])."""
    nodes = list(Node.objects.all())
    verdicts: dict[tuple[Request, Constraint], Reason | None] = {}
    kept, impossible = [], []
    for w in waiting:
        if (w.request, w.constraint) not in verdicts:
            verdicts[w.request, w.constraint] = never_fits(w.request, nodes, w.constraint)
        why = verdicts[w.request, w.constraint]
        if why:
            impossible.append((w, why))
        else:
            kept.append(w)
    return kept, impossible
