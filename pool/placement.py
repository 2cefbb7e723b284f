"""Placement: which waiting job goes on which node, on which cores. A pure function of the queue
and the free capacity: it reads and writes nothing, so the scheduler pass that calls it owns the
locks and the writes."""

import uuid
from dataclasses import dataclass
from datetime import datetime

from pool.models import Node


@dataclass(frozen=True)
class Request:
    cpus: int
    memory_mb: int
    gpus: int


@dataclass(frozen=True)
class Free:
    cpu_ids: list[int]
    memory_mb: int
    gpu_ids: list[str]


@dataclass(frozen=True)
class Waiting:
    """A job waiting for compute, as the scheduler sees it."""

    job_id: uuid.UUID
    team_id: int
    submitted_at: datetime
    attempt: int
    request: Request


@dataclass(frozen=True)
class Placement:
    job_id: uuid.UUID
    attempt: int
    node: Node
    cpu_set: list[int]
    gpu_ids: list[str]
    memory_mb: int


@dataclass(frozen=True)
class Plan:
    placements: list[Placement]
    # The jobs left waiting, in queue order, each with why it waits.
    left: list[tuple[Waiting, str]]


def fits(request: Request, free: Free) -> bool:
    return (
        len(free.cpu_ids) >= request.cpus and free.memory_mb >= request.memory_mb and len(free.gpu_ids) >= request.gpus
    )


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def never_fits(request: Request, nodes: list[Node]) -> str | None:
    """Why no node of the pool could ever give this much, or None when one could."""
    if not nodes:
        return None  # an empty pool says nothing yet: nodes register when their workers start
    if any(fits(request, Free(n.cpu_ids, n.memory_mb, n.gpu_ids)) for n in nodes):
        return None
    return (
        f"needs {plural(request.cpus, 'core')}, {request.memory_mb} MB, {plural(request.gpus, 'gpu')}; "
        f"the largest node has {plural(max(n.cpus for n in nodes), 'core')}, "
        f"{max(n.memory_mb for n in nodes)} MB, {plural(max(n.gpus for n in nodes), 'gpu')}"
    )


def best_fit(request: Request, nodes: list[Node], free: dict[int, Free]) -> Node | None:
    """The node where the job leaves the fewest cores (then memory) idle."""
    candidates = [n for n in nodes if fits(request, free[n.pk])]
    if not candidates:
        return None
    return min(candidates, key=lambda n: (len(free[n.pk].cpu_ids), free[n.pk].memory_mb, n.name))


def place(queue: list[Waiting], nodes: list[Node], free: dict[int, Free], *, limit: int) -> Plan:
    """Walk the queue in order, placing each job on its best-fit node with the lowest free core ids.

    A job that does not fit yet is skipped, so a smaller one behind it may run (backfill). At most
    `limit` jobs are placed. `free` is not changed.
    """
    free = dict(free)
    placements: list[Placement] = []
    unplaced: list[Waiting] = []
    for i, waiting in enumerate(queue):
        request = waiting.request
        node = best_fit(request, nodes, free)
        if node is None:
            unplaced.append(waiting)
            continue
        room = free[node.pk]
        placements.append(
            Placement(
                job_id=waiting.job_id,
                attempt=waiting.attempt,
                node=node,
                cpu_set=room.cpu_ids[: request.cpus],
                gpu_ids=room.gpu_ids[: request.gpus],
                memory_mb=request.memory_mb,
            )
        )
        free[node.pk] = Free(
            room.cpu_ids[request.cpus :], room.memory_mb - request.memory_mb, room.gpu_ids[request.gpus :]
        )
        if len(placements) >= limit or not any(free[n.pk].cpu_ids for n in nodes):
            unplaced.extend(queue[i + 1 :])
            break
    return Plan(placements=placements, left=why_waiting(unplaced, nodes, free))


def why_waiting(queue: list[Waiting], nodes: list[Node], free: dict[int, Free]) -> list[tuple[Waiting, str]]:
    """Each job's reason to wait, given the capacity still free: one answer per request shape."""
    if not nodes:
        return [(w, "no node is accepting work (all are draining or offline)") for w in queue]
    room = list(free.values())
    shortfalls: dict[Request, str | None] = {}
    left = []
    for position, waiting in enumerate(queue, start=1):
        request = waiting.request
        if request not in shortfalls:
            shortfalls[request] = None if any(fits(request, f) for f in room) else shortfall(request, room)
        ahead = f"{plural(position - 1, 'job')} ahead in the queue" if position > 1 else ""
        why = "; ".join(part for part in (shortfalls[request], ahead) if part) or "next to be held"
        left.append((waiting, why))
    return left


def shortfall(request: Request, free: list[Free]) -> str:
    most_cores = max(len(f.cpu_ids) for f in free)
    most_memory = max(f.memory_mb for f in free)
    most_gpus = max(len(f.gpu_ids) for f in free)
    if request.cpus > most_cores:
        return f"needs {plural(request.cpus, 'core')}; largest free: {most_cores}"
    if request.memory_mb > most_memory:
        return f"needs {request.memory_mb} MB; largest free: {most_memory} MB"
    if request.gpus > most_gpus:
        return f"needs {plural(request.gpus, 'gpu')}; largest free: {most_gpus}"
    return "no single node has all of it free at once"
