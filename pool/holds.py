"""Holds: compute held for a job on one node, from hold_many to release_hold."""

from datetime import datetime

from django.db import transaction

from pool.models import HeldCore, HeldGpu, Hold
from pool.placement import Placement


@transaction.atomic
def hold_many(placements: list[Placement], *, now: datetime) -> list[Hold]:
    """Hold exact cores, memory and gpus for each placement; the caller locked the nodes and moves the jobs."""
    if not placements:
        return []
    holds = Hold.objects.bulk_create(
        [
            Hold(job_id=p.job_id, node=p.node, attempt=p.attempt, cpu_set=sorted(p.cpu_set), memory_mb=p.memory_mb,
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
    return holds


@transaction.atomic
def release_hold(hold: Hold, *, now: datetime) -> Hold:
    """Give its cores and gpus back to the pool; the meter stops at `now`."""
    if hold.released_at is not None:
        return hold
    hold.released_at = max(now, hold.held_at)
    hold.save(update_fields=["released_at"])
    HeldCore.objects.filter(hold=hold).delete()
    HeldGpu.objects.filter(hold=hold).delete()
    return hold
