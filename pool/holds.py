"""Holds: compute held for a job on one node. The meter runs from hold_for to release_hold."""

from datetime import datetime

from django.db import transaction

from pool.models import HeldCore, HeldGpu, Hold, Node


@transaction.atomic
def hold_for(job, node: Node, *, cpu_set: list[int], gpu_ids: list[str], now: datetime) -> Hold:
    """Hold exact cores, memory and gpus on `node` for `job`, and move the job to RENT.

    The caller has locked the node row; the unique constraints on HeldCore/HeldGpu refuse a
    double booking even if it had not.
    """
    from jobs.lifecycle import mark_held

    hold = Hold.objects.create(
        job=job, node=node, cpu_set=sorted(cpu_set), memory_mb=job.memory_mb, gpu_ids=list(gpu_ids), held_at=now
    )
    HeldCore.objects.bulk_create([HeldCore(node=node, core=c, hold=hold) for c in cpu_set])
    HeldGpu.objects.bulk_create([HeldGpu(node=node, device=d, hold=hold) for d in gpu_ids])
    mark_held(job, now=now)
    return hold


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
