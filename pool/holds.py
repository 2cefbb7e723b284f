"""Holds: compute held for a job on one node. The meter runs from the hold to release_hold."""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from pool.models import HeldCore, HeldGpu, Hold, Node


@dataclass(frozen=True)
class Placement:
    job: object
    node: Node
    cpu_set: list[int]
    gpu_ids: list[str]


@transaction.atomic
def hold_many(placements: list[Placement], *, now: datetime) -> list[Hold]:
    """Hold exact cores, memory and gpus for each job, and move the jobs to RENT, in one go.

    The caller has locked the node rows; the unique constraints on HeldCore/HeldGpu refuse a
    double booking even if it had not.
    """
    from jobs.lifecycle import mark_held_many

    if not placements:
        return []
    holds = Hold.objects.bulk_create(
        [
            Hold(job=p.job, node=p.node, attempt=p.job.attempt, cpu_set=sorted(p.cpu_set), memory_mb=p.job.memory_mb,
                 gpu_ids=list(p.gpu_ids), held_at=now)
            for p in placements
        ]
    )  # fmt: skip
    HeldCore.objects.bulk_create(
        [HeldCore(node=p.node, core=c, hold=h) for p, h in zip(placements, holds, strict=True) for c in p.cpu_set]
    )
    gpus = [HeldGpu(node=p.node, device=d, hold=h) for p, h in zip(placements, holds, strict=True) for d in p.gpu_ids]
    if gpus:
        HeldGpu.objects.bulk_create(gpus)
    mark_held_many([p.job for p in placements], now=now)
    return holds


def hold_for(job, node: Node, *, cpu_set: list[int], gpu_ids: list[str], now: datetime) -> Hold:
    """Hold compute on `node` for one job (see hold_many)."""
    return hold_many([Placement(job, node, cpu_set, gpu_ids)], now=now)[0]


@transaction.atomic
def release_hold(hold: Hold, *, now: datetime) -> Hold:
    """End the hold: its cores and gpus go back to the pool; the meter stops at `now`."""
    if hold.released_at is not None:
        return hold
    hold.released_at = max(now, hold.held_at)
    hold.save(update_fields=["released_at"])
    HeldCore.objects.filter(hold=hold).delete()
    HeldGpu.objects.filter(hold=hold).delete()
    return hold
