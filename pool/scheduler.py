"""The scheduler: places waiting jobs on nodes, holding exact cores, memory and gpus."""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from pool.holds import hold_for
from pool.models import Hold, Node
from pool.nodes import Free, free_capacity


@dataclass(frozen=True)
class Request:
    cpus: int
    memory_mb: int
    gpus: int


def fits(request: Request, free: Free) -> bool:
    return (
        len(free.cpu_ids) >= request.cpus and free.memory_mb >= request.memory_mb and len(free.gpu_ids) >= request.gpus
    )


def never_fits(request: Request, nodes: list[Node]) -> str | None:
    """Why no node of the pool could ever give this much, or None when one could."""
    if not nodes:
        return None  # an empty pool says nothing yet: nodes register when their workers start
    if any(fits(request, Free(n.cpu_ids, n.memory_mb, n.gpu_ids)) for n in nodes):
        return None
    return (
        f"needs {request.cpus} cores, {request.memory_mb} MB, {request.gpus} gpus; the largest node has "
        f"{max(n.cpus for n in nodes)} cores, {max(n.memory_mb for n in nodes)} MB, "
        f"{max(n.gpus for n in nodes)} gpus"
    )


def best_fit(request: Request, nodes: list[Node], free: dict[int, Free]) -> Node | None:
    """The node where the job leaves the fewest cores (then memory) idle."""
    candidates = [n for n in nodes if fits(request, free[n.pk])]
    if not candidates:
        return None
    return min(candidates, key=lambda n: (len(free[n.pk].cpu_ids), free[n.pk].memory_mb, n.name))


def waiting_jobs():
    from jobs.models import Job, Stage

    return Job.objects.filter(stage=Stage.SUBMIT, cancel_requested=False).order_by("submitted_at", "id")


@transaction.atomic
def schedule(*, now: datetime, limit: int = 1000) -> list[Hold]:
    """One scheduler pass. Returns the holds it made.

    1. Lock every active node row (in name order, so concurrent passes queue up instead of
       deadlocking); the pass then owns the free capacity it computes.
    2. Walk the waiting jobs in queue order, skipping rows another pass has locked.
    3. Place each on its best-fit node, taking the lowest free core ids, and hold it.
    """
    nodes = list(Node.objects.select_for_update().filter(state=Node.State.ACTIVE).order_by("name"))
    if not nodes:
        return []
    free = free_capacity(nodes)
    holds = []
    for job in waiting_jobs().select_for_update(skip_locked=True)[:limit]:
        request = Request(job.cpus, job.memory_mb, job.gpus)
        node = best_fit(request, nodes, free)
        if node is None:
            continue  # FIFO with backfill: a smaller job behind may still fit
        room = free[node.pk]
        cpu_set, gpu_ids = room.cpu_ids[: job.cpus], room.gpu_ids[: job.gpus]
        holds.append(hold_for(job, node, cpu_set=cpu_set, gpu_ids=gpu_ids, now=now))
        free[node.pk] = Free(room.cpu_ids[job.cpus :], room.memory_mb - job.memory_mb, room.gpu_ids[job.gpus :])
        if not any(free[n.pk].cpu_ids for n in nodes):
            break
    return holds
