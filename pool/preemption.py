"""Preemption: which running jobs of lower priority give their cores to which waiting jobs of a preempting
queue (the lowest first, then the most recently started); a pure function, so the pass owns locks and writes."""

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from pool.features import Constraint
from pool.models import Node, Queue
from pool.placement.reasons import WaitCode
from pool.placement.types import FreeCapacity, Placement, Request, Running, Unplaced, Waiting, Window

# What keeps a job from starting for want of room, which preemption can mend. A job held back by its queue's
# cap, a feature, a window, the probes or its place in line waits as it would without preemption.
FOR_WANT_OF_ROOM = frozenset({
    WaitCode.RESERVED, WaitCode.RESERVED_AFTER, WaitCode.NEEDS_CORES, WaitCode.NEEDS_MEMORY, WaitCode.NEEDS_GPUS,
    WaitCode.NOT_AT_ONCE, WaitCode.BEHIND_RESERVATION,
})  # fmt: skip


def not_preemptable(*, declared: bool, queue: Queue | None, preemptions: int) -> str:
    """Why a higher queue's job may not stop this job ("" when it may); E31_MAX_PREEMPTIONS keeps a stream of
    urgent work from keeping one job from its end."""
    if not declared:
        return "it asked not to be (preemptable=false)"
    if queue is not None and not queue.preemptable:
        return f"the queue {queue.name} does not let its jobs be preempted"
    if preemptions >= (most := settings.E31_MAX_PREEMPTIONS):
        if most == 0:
            return "the pool lets no job be preempted (E31_MAX_PREEMPTIONS is 0)"
        times = "once" if most == 1 else f"{most} times"
        return f"it has been preempted {times}, the most a job may be (E31_MAX_PREEMPTIONS)"
    return ""


def preemptable(*, declared: bool, queue: Queue | None, preemptions: int) -> bool:
    return not not_preemptable(declared=declared, queue=queue, preemptions=preemptions)


@dataclass(frozen=True)
class Preemption:
    """A waiting job and the running jobs on one node whose compute it takes once they stop."""

    job_id: uuid.UUID
    node: Node
    victims: tuple[uuid.UUID, ...]


@dataclass
class _Room:
    """A node's free compute after the pass's placements."""

    node: Node
    cpus: int
    memory_mb: int
    gpus: int
    windows: Sequence[Window]

    def fits(self, request: Request, victims: Sequence[Running]) -> bool:
        return (
            self.cpus + sum(len(v.cpu_ids) for v in victims) >= request.cpus
            and self.memory_mb + sum(v.memory_mb for v in victims) >= request.memory_mb
            and self.gpus + sum(len(v.gpu_ids) for v in victims) >= request.gpus
        )

    def free_for(self, waiting: Waiting, start: datetime) -> bool:
        node, request = self.node, waiting.request
        if node.state != Node.State.ACTIVE or node.short_of_scratch:
            return False
        if not waiting.constraint.allows(frozenset(node.features)):
            return False
        if node.cpus < request.cpus or node.memory_mb < request.memory_mb or node.gpus < request.gpus:
            return False
        end = start + timedelta(seconds=waiting.time_limit_s)
        return not any(w.overlaps(start, end) for w in self.windows)


def choose(
    left: Sequence[Unplaced],
    nodes: Sequence[Node],
    free: Mapping[int, FreeCapacity],
    *,
    placements: Sequence[Placement],
    running: Sequence[Running],
    stopping: Mapping[uuid.UUID, uuid.UUID | None],
    now: datetime,
    windows: Mapping[int, Sequence[Window]] | None = None,
    grace: timedelta = timedelta(),
) -> list[Preemption]:
    """The preemptions for the jobs a pass left waiting, each on one node. `stopping`: the running jobs already
    asked to stop (→ the job they stop for, None for a cancel); `grace`: how long victims may take to stop."""
    windows = windows or {}
    rooms = {n.pk: _room(n, free[n.pk], placements, windows.get(n.pk, ())) for n in nodes if n.pk in free}
    preempting = {by for by in stopping.values() if by is not None}
    taken: set[uuid.UUID] = set(stopping)
    by_node: dict[int, list[Running]] = {}
    for hold in running:
        if hold.job_id is not None and hold.preemptable:
            by_node.setdefault(hold.node_id, []).append(hold)
    chosen = []
    # What found no victims finds none later in the pass: victims are only taken and rooms only shrink.
    hopeless: set[tuple[Request, Constraint, int, int]] = set()
    for job in left:
        waiting = job.waiting
        if not waiting.preempts or waiting.node_id is not None or waiting.job_id in preempting:
            continue
        kind = (waiting.request, waiting.constraint, waiting.time_limit_s, waiting.priority)
        if job.reason.code not in FOR_WANT_OF_ROOM or kind in hopeless:
            continue
        best = _best(waiting, rooms, by_node, taken, now, grace)
        if best is None:
            hopeless.add(kind)
            continue
        room, victims = best
        taken.update(v.job_id for v in victims if v.job_id is not None)
        # What is left on the node once they stop and the preemptor starts there.
        room.cpus += sum(len(v.cpu_ids) for v in victims) - waiting.request.cpus
        room.memory_mb += sum(v.memory_mb for v in victims) - waiting.request.memory_mb
        room.gpus += sum(len(v.gpu_ids) for v in victims) - waiting.request.gpus
        chosen.append(Preemption(waiting.job_id, room.node, tuple(v.job_id for v in victims if v.job_id)))
    return chosen


def _room(node: Node, free: FreeCapacity, placements: Sequence[Placement], windows: Sequence[Window]) -> _Room:
    placed = [p for p in placements if p.node.pk == node.pk]
    return _Room(
        node,
        len(free.cpu_ids) - sum(len(p.cpu_set) for p in placed),
        free.memory_mb - sum(p.memory_mb for p in placed),
        len(free.gpu_ids) - sum(len(p.gpu_ids) for p in placed),
        windows,
    )


def _best(
    waiting: Waiting,
    rooms: Mapping[int, _Room],
    by_node: Mapping[int, list[Running]],
    taken: set[uuid.UUID],
    now: datetime,
    grace: timedelta,
) -> tuple[_Room, list[Running]] | None:
    """The node where the least valuable victims make room: by highest priority, jobs, cores, then work lost."""
    found = []
    for pk, room in rooms.items():
        if not room.free_for(waiting, now + grace):
            continue
        candidates = [v for v in by_node.get(pk, ()) if v.priority < waiting.priority and v.job_id not in taken]
        victims = fewest(waiting.request, room, candidates)
        if victims:
            cores = sum(len(v.cpu_ids) for v in victims)
            lost = sum(len(v.cpu_ids) * (now - (v.started_at or now)).total_seconds() for v in victims)
            rank = (max(v.priority for v in victims), len(victims), cores, lost, room.node.name)
            found.append((rank, room, victims))
    if not found:
        return None
    _, room, victims = min(found, key=lambda f: f[0])
    return room, victims


def fewest(request: Request, room: _Room, candidates: Sequence[Running]) -> list[Running]:
    """Victims for `request`, lowest priority and latest started first, then those not needed spared; [] if none do."""
    order = sorted(candidates, key=lambda v: (v.priority, -(v.started_at or v.ends_at).timestamp()))
    victims: list[Running] = []
    for victim in order:
        if room.fits(request, victims):
            break
        victims.append(victim)
    if not victims or not room.fits(request, victims):
        return []
    for victim in reversed(list(victims)):
        spared = [v for v in victims if v is not victim]
        if room.fits(request, spared):
            victims = spared
    return victims
