"""Backfill with reservations: which waiting job goes on which node and cores, in what order, and why the
others wait. A pure function, so the pass owns the locks and the writes."""

import bisect
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from datetime import datetime, timedelta
from typing import TypeVar

from pool.features import Constraint
from pool.models import Node
from pool.placement.reasons import Reason, ShortOfScratch, WaitCode
from pool.placement.types import (
    FreeCapacity,
    Placement,
    PlacementPlan,
    QueueCaps,
    Request,
    Reservation,
    Running,
    Unplaced,
    Waiting,
    Window,
)

# Blocked jobs a pass reserves for: more keep big jobs from being overtaken, fewer leave more to backfill.
RESERVATIONS = 4

T = TypeVar("T", int, str)


def serve_order(
    waiting: Sequence[Waiting], usage: Mapping[int, float], *, now: datetime, max_wait_s: int
) -> list[Waiting]:
    """By queue priority; within it, the jobs waited past `max_wait_s` (0: no bound) by submit time, then the others
    in rounds of one job per team, ordered by the teams' usage. Rounds are HTCondor's negotiation cycle: else a
    light team's burst would take every freed core while a heavier team's one job waits; the bound is Slurm's age
    factor made a step."""
    overdue = now - timedelta(seconds=max_wait_s) if max_wait_s else None
    rounds: dict[uuid.UUID, int] = {}
    taken: Counter[tuple[int, int]] = Counter()
    for w in sorted(waiting, key=lambda w: (w.submitted_at, w.rank, str(w.job_id))):
        if overdue is None or w.submitted_at > overdue:
            rounds[w.job_id] = taken[w.priority, w.team_id]
            taken[w.priority, w.team_id] += 1

    def key(w: Waiting) -> tuple[int, bool, int, float, datetime, int, str]:
        if w.job_id not in rounds:  # waited past the bound
            return (-w.priority, False, 0, 0.0, w.submitted_at, w.rank, str(w.job_id))
        return (-w.priority, True, rounds[w.job_id], usage.get(w.team_id, 0.0), w.submitted_at, w.rank, str(w.job_id))

    return sorted(waiting, key=key)


def fits(request: Request, free: FreeCapacity) -> bool:
    return (
        len(free.cpu_ids) >= request.cpus and free.memory_mb >= request.memory_mb and len(free.gpu_ids) >= request.gpus
    )


def never_fits(request: Request, nodes: list[Node], constraint: Constraint = Constraint.ANY) -> Reason | None:
    """Why no node of the pool could ever give this much with the features asked, or None when one could."""
    if not nodes:
        return None  # an empty pool says nothing yet: nodes register when their workers start
    featured = [n for n in nodes if constraint.allows(frozenset(n.features))]
    if not featured:
        return Reason(WaitCode.NO_FEATURE, detail=",".join(closest_gap(constraint, nodes)))
    nodes = featured
    if any(fits(request, FreeCapacity(n.cpu_ids, n.memory_mb, n.gpu_ids)) for n in nodes):
        return None
    largest = {f"largest_{name}": max(getattr(n, name) for n in nodes) for name in ("cpus", "memory_mb", "gpus")}
    return Reason(WaitCode.NEVER_FITS, {**asdict(request), **largest})


def closest_gap(constraint: Constraint, nodes: Sequence[Node]) -> list[str]:
    """What none of these nodes has, for the alternative closest to being met: its features no node has at
    all, or, when each is on some node but never all on one, the whole alternative (needed together). So
    the words "no node has the feature X" never name a feature one of them has."""
    present = set().union(*(n.features for n in nodes))
    gaps = [sorted(alternative - present) or sorted(alternative) for alternative in constraint.alternatives]
    return min(gaps, key=lambda gap: (len(gap), gap)) if gaps else []


def place(
    queue: list[Waiting],
    nodes: list[Node],
    free: dict[int, FreeCapacity],
    *,
    running: Sequence[Running],
    now: datetime,
    limit: int,
    reservations: int = RESERVATIONS,
    windows: Mapping[int, Sequence[Window]] | None = None,
    caps: Mapping[int, QueueCaps] | None = None,
) -> PlacementPlan:
    """Place up to `limit` jobs in queue order on their best-fit nodes, with backfill behind reservations as Slurm's.

    1. A job that may start now takes the node with the fewest free cores, then memory, that fits it,
       and its lowest free ids; it then counts as a hold ending at now + its time limit.
    2. The first `reservations` jobs that may not get the earliest moment a node has their request
       for their whole time limit.
    3. A job behind may start first only where it cannot delay a reservation: it ends before the
       reservation starts, or takes only what the reservation does not need.
    Policy: a job goes only to nodes with the features it asks for, never runs into a node's maintenance
    window, and waits while its team holds its queue's cap (`caps`, by queue id).
    """
    windows = windows or {}
    # A node short of scratch space takes no job and is reserved for by none until it has it again.
    pool = {n.pk: _Node(n, free[n.pk], now, windows.get(n.pk, ())) for n in nodes if not n.short_of_scratch}
    limits = _Limits(caps or {}, running)
    for hold in running:
        if (node := pool.get(hold.node_id)) is not None:
            # Only what the node lends now: it may have registered again with fewer cores or gpus.
            cpu_ids = [c for c in hold.cpu_ids if c in node.cpu_ids]
            gpu_ids = [g for g in hold.gpu_ids if g in node.gpu_ids]
            node.add_end(hold.ends_at, cpu_ids, hold.memory_mb, gpu_ids)
    # Nodes with a free core, in best-fit order: the first one a job fits on is its best fit.
    order = sorted(n.key() for n in pool.values() if n.free.cpu_ids)
    placements: list[Placement] = []
    made: list[Reservation] = []
    reserved: dict[uuid.UUID, Reservation] = {}
    # What could not start: nothing of that shape (on that node, when pinned) can, later in the pass.
    blocked: set[tuple[Request, int, int | None, Constraint]] = set()
    held_back: set[uuid.UUID] = set()  # considered, and could not start now
    unreservable: set[tuple[Request, int, int | None, Constraint]] = set()  # no active node could ever hold it
    capped: dict[uuid.UUID, Reason] = {}  # held back by its queue's cap for its team
    in_window: dict[tuple[Request, int, int | None, Constraint], Window] = {}  # would start now but for a window
    for waiting in queue:
        if len(placements) >= limit or (not order and len(made) >= reservations):
            break
        if (over := limits.over(waiting)) is not None:
            capped[waiting.job_id] = over
            continue
        request = waiting.request
        shape = waiting.shape()
        if order and shape not in blocked:
            end = now + timedelta(seconds=waiting.time_limit_s)
            taken = _take_now(order, pool, waiting, end)
            if taken is not None:
                node, cpu_set, gpu_ids = taken
                placements.append(Placement(waiting.job_id, waiting.attempt, node.node, cpu_set, gpu_ids,
                                            request.memory_mb))  # fmt: skip
                del order[bisect.bisect_left(order, node.key())]
                node.take(cpu_set, request.memory_mb, gpu_ids, end)
                limits.take(waiting)
                if node.free.cpu_ids:
                    bisect.insort(order, node.key())
                continue
            blocked.add(shape)
            if windows and (window := _window_in_way(order, pool, waiting, end)) is not None:
                in_window[shape] = window
        held_back.add(waiting.job_id)
        if len(made) < reservations and shape not in unreservable:
            reservation = _reserve(waiting, pool, now)
            if reservation is None:
                unreservable.add(shape)
                continue
            made.append(reservation)
            reserved[waiting.job_id] = reservation
            pool[reservation.node.pk].add_reservation(reservation)
    placed = {p.job_id for p in placements}
    unplaced = [w for w in queue if w.job_id not in placed]
    left = _reasons(unplaced, nodes, pool, reserved, held_back=held_back, capped=capped, in_window=in_window)
    return PlacementPlan(placements=placements, left=left, reservations=made)


class _Limits:
    """What each team holds in each capped queue over the pass, counting the jobs it places."""

    def __init__(self, caps: Mapping[int, QueueCaps], running: Sequence[Running]) -> None:
        self.caps = caps
        self.cores: Counter[tuple[int | None, int | None]] = Counter()
        self.jobs: Counter[tuple[int | None, int | None]] = Counter()
        for hold in running:
            if hold.queue_id in caps and hold.team_id is not None:
                self.cores[hold.queue_id, hold.team_id] += len(hold.cpu_ids)
                self.jobs[hold.queue_id, hold.team_id] += 1

    def over(self, waiting: Waiting) -> Reason | None:
        """Why starting it would take its team past its queue's cap, or None."""
        cap = self.caps.get(waiting.queue_id) if waiting.queue_id is not None else None
        if cap is None:
            return None
        key = (waiting.queue_id, waiting.team_id)
        if cap.jobs is not None and self.jobs[key] + 1 > cap.jobs:
            return Reason(WaitCode.QUEUE_LIMIT, {"jobs": cap.jobs, "in_use": self.jobs[key]}, detail=cap.name)
        if cap.cores is not None and self.cores[key] + waiting.request.cpus > cap.cores:
            numbers = {"cores": cap.cores, "in_use": self.cores[key], "cpus": waiting.request.cpus}
            return Reason(WaitCode.QUEUE_LIMIT, numbers, detail=cap.name)
        return None

    def take(self, waiting: Waiting) -> None:
        if waiting.queue_id in self.caps:
            self.cores[waiting.queue_id, waiting.team_id] += waiting.request.cpus
            self.jobs[waiting.queue_id, waiting.team_id] += 1


class _Node:
    """One node over the pass: what is free now, what frees up when, what is reserved, and its windows."""

    def __init__(self, node: Node, free: FreeCapacity, now: datetime, windows: Sequence[Window] = ()) -> None:
        self.node = node
        self.cpu_ids, self.gpu_ids = set(node.cpu_ids), set(node.gpu_ids)
        self.features = frozenset(node.features)
        self.free = free
        self.now = now
        self.windows = sorted((w for w in windows if w.end > now), key=lambda w: w.start)
        # (ends at, cores, memory, gpus) of each running hold and of each job placed in this pass.
        self.ends: list[tuple[datetime, Sequence[int], int, Sequence[str]]] = []
        self.ends_sorted = True
        self.reservations: list[Reservation] = []
        self.memory_then: dict[datetime, int] = {}

    def takes(self, pinned_to: int | None) -> bool:
        """Whether it takes a job pinned to `pinned_to` (None: any node): a proving node only its own."""
        return self.node.state != Node.State.PROVING or pinned_to == self.node.pk

    def accepts(self, waiting: Waiting) -> bool:
        """Whether this job may run here at all: its pin, the node's state and the features it asks for."""
        if waiting.node_id is not None and waiting.node_id != self.node.pk:
            return False
        return self.takes(waiting.node_id) and waiting.constraint.allows(self.features)

    def window_during(self, start: datetime, end: datetime) -> Window | None:
        """The first maintenance window a run from `start` to `end` would run into, or None."""
        for window in self.windows:
            if window.start >= end:  # sorted by start: none later can overlap
                return None
            if window.overlaps(start, end):
                return window
        return None

    def key(self) -> tuple[int, int, str, int]:
        return (len(self.free.cpu_ids), self.free.memory_mb, self.node.name, self.node.pk)

    def add_end(self, at: datetime, cpu_ids: Sequence[int], memory_mb: int, gpu_ids: Sequence[str]) -> None:
        # A hold past its time limit ends any moment now: its job is being stopped.
        self.ends.append((max(at, self.now), cpu_ids, memory_mb, gpu_ids))
        self.ends_sorted = False
        self.memory_then.clear()

    def take(self, cpu_set: list[int], memory_mb: int, gpu_ids: list[str], end: datetime) -> None:
        self.free = FreeCapacity(_without(self.free.cpu_ids, cpu_set), self.free.memory_mb - memory_mb,
                         _without(self.free.gpu_ids, gpu_ids))  # fmt: skip
        self.add_end(end, cpu_set, memory_mb, gpu_ids)

    def add_reservation(self, reservation: Reservation) -> None:
        self.reservations.append(reservation)
        self.memory_then.clear()

    def sorted_ends(self) -> list[tuple[datetime, Sequence[int], int, Sequence[str]]]:
        if not self.ends_sorted:
            self.ends.sort(key=lambda end: end[0])
            self.ends_sorted = True
        return self.ends

    def memory_at(self, moment: datetime) -> int:
        """Memory free at `moment`, counting the holds ended and the reservations running by then."""
        if moment not in self.memory_then:
            back = sum(memory for at, _, memory, _ in self.ends if at <= moment)
            taken = sum(r.memory_mb for r in self.reservations if r.start <= moment < r.end)
            self.memory_then[moment] = self.free.memory_mb + back - taken
        return self.memory_then[moment]

    def usable_now(self, request: Request, end: datetime) -> tuple[list[int], list[str]] | None:
        """The cores and gpus a job running from now until `end` may take here, or None."""
        free = self.free
        if free.memory_mb < request.memory_mb or len(free.gpu_ids) < request.gpus:
            return None  # the cores were checked by the caller
        ahead = [r for r in self.reservations if r.start < end]  # a job ending by a reservation's start is no bother
        if not ahead:
            return free.cpu_ids[: request.cpus], free.gpu_ids[: request.gpus]
        cpu_ids = [c for c in free.cpu_ids if not any(c in r.cpu_ids for r in ahead)]
        gpu_ids = [g for g in free.gpu_ids if not any(g in r.gpu_ids for r in ahead)]
        if len(cpu_ids) < request.cpus or len(gpu_ids) < request.gpus:
            return None
        if any(self.memory_at(r.start) < request.memory_mb for r in ahead):
            return None  # it would still hold memory a reservation needs when it starts
        return cpu_ids[: request.cpus], gpu_ids[: request.gpus]

    def earliest(
        self, request: Request, seconds: int, before: datetime | None
    ) -> tuple[datetime, list[int], list[str]] | None:
        """The earliest moment (before `before`) the job fits here for its time limit, with its cores and gpus;
        memory is checked at the start and at each reservation starting during the run (holds only give it back)."""
        node = self.node
        if node.cpus < request.cpus or node.memory_mb < request.memory_mb or node.gpus < request.gpus:
            return None
        ends = self.sorted_ends()
        moments = sorted({
            self.now, *(at for at, *_ in ends), *(r.end for r in self.reservations), *(w.end for w in self.windows)
        })  # fmt: skip
        cores, memory, gpus = set(self.free.cpu_ids), self.free.memory_mb, set(self.free.gpu_ids)
        i = 0
        for moment in moments:
            if before is not None and moment >= before:
                return None
            while i < len(ends) and ends[i][0] <= moment:
                _, end_cores, end_memory, end_gpus = ends[i]
                cores.update(end_cores)
                memory += end_memory
                gpus.update(end_gpus)
                i += 1
            if len(cores) < request.cpus or memory < request.memory_mb or len(gpus) < request.gpus:
                continue
            finish = moment + timedelta(seconds=seconds)
            if self.windows and self.window_during(moment, finish) is not None:
                continue
            overlapping = [r for r in self.reservations if r.start < finish and r.end > moment]
            usable_cores = cores.difference(*(r.cpu_ids for r in overlapping))
            usable_gpus = gpus.difference(*(r.gpu_ids for r in overlapping))
            if len(usable_cores) < request.cpus or len(usable_gpus) < request.gpus:
                continue
            checks = [moment, *(r.start for r in overlapping if r.start > moment)]
            if any(self.memory_at(at) < request.memory_mb for at in checks):
                continue
            return (
                moment,
                _pick(usable_cores, self.free.cpu_ids, request.cpus),
                _pick(usable_gpus, self.free.gpu_ids, request.gpus),
            )
        return None


def _without(ids: list[T], taken: list[T]) -> list[T]:
    if ids[: len(taken)] == taken:  # the lowest ids, as a job placed where nothing is reserved takes
        return ids[len(taken) :]
    gone = set(taken)
    return [i for i in ids if i not in gone]


def _pick(usable: set[T], free_now: list[T], count: int) -> list[T]:
    """A reservation's ids: those held now first, as nobody could use them before, then the highest free ones."""
    free = set(free_now)
    held = sorted(i for i in usable if i not in free)
    spare = sorted((i for i in usable if i in free), reverse=True)
    return (held + spare)[:count]


def _take_now(
    order: list[tuple[int, int, str, int]],
    pool: dict[int, "_Node"],
    waiting: Waiting,
    end: datetime,
    *,
    mind_windows: bool = True,
) -> tuple["_Node", list[int], list[str]] | None:
    """The best-fit node where the job may start now, with its cores and gpus."""
    request = waiting.request
    for _, memory_mb, _, pk in order[bisect.bisect_left(order, (request.cpus,)) :]:
        if memory_mb < request.memory_mb or (waiting.node_id is not None and pk != waiting.node_id):
            continue
        node = pool[pk]
        if not node.accepts(waiting):
            continue
        if mind_windows and node.windows and node.window_during(node.now, end) is not None:
            continue
        usable = node.usable_now(request, end)
        if usable is not None:
            return node, *usable
    return None


def _window_in_way(
    order: list[tuple[int, int, str, int]], pool: dict[int, "_Node"], waiting: Waiting, end: datetime
) -> Window | None:
    """The maintenance window that alone keeps the job from starting now, or None."""
    taken = _take_now(order, pool, waiting, end, mind_windows=False)
    return taken[0].window_during(taken[0].now, end) if taken is not None else None


def _reserve(waiting: Waiting, pool: dict[int, "_Node"], now: datetime) -> Reservation | None:
    """A reservation on the node where the job can start earliest."""
    request = waiting.request
    best: tuple[datetime, _Node, list[int], list[str]] | None = None
    for node in pool.values():
        if not node.accepts(waiting):
            continue
        found = node.earliest(request, waiting.time_limit_s, best[0] if best else None)
        if found is not None:
            best = (found[0], node, found[1], found[2])
    if best is None:
        return None
    start, node, cpu_ids, gpu_ids = best
    frees = None
    if not any(r.end == start for r in node.reservations):  # else it starts when a reserved job ahead ends
        end = start + timedelta(seconds=waiting.time_limit_s)
        alongside = [r for r in node.reservations if r.start < end and r.end > start]
        cores_held = request.cpus - len(set(node.free.cpu_ids).difference(*(r.cpu_ids for r in alongside)))
        gpus_held = request.gpus - len(set(node.free.gpu_ids).difference(*(r.gpu_ids for r in alongside)))
        memory_held = request.memory_mb - node.free.memory_mb
        if cores_held > 0 or memory_held > 0 or gpus_held > 0:
            frees = Request(max(cores_held, 0), max(memory_held, 0), max(gpus_held, 0))
    return Reservation(
        job_id=waiting.job_id, node=node.node, cpu_ids=frozenset(cpu_ids), memory_mb=request.memory_mb,
        gpu_ids=frozenset(gpu_ids), start=start, end=start + timedelta(seconds=waiting.time_limit_s),
        frees=frees,
    )  # fmt: skip


def _reasons(
    queue: list[Waiting],
    nodes: list[Node],
    pool: dict[int, "_Node"],
    reserved: dict[uuid.UUID, Reservation],
    *,
    held_back: set[uuid.UUID],
    capped: Mapping[uuid.UUID, Reason],
    in_window: Mapping[tuple[Request, int, int | None, Constraint], Window],
) -> list[Unplaced]:
    if not nodes:
        return [Unplaced(w, Reason(WaitCode.NO_NODE)) for w in queue]
    short = tuple(ShortOfScratch(n.name, n.scratch_free_mb, n.scratch_min_free_mb) for n in nodes if n.short_of_scratch)
    if not pool:
        return [Unplaced(w, Reason(WaitCode.SHORT_OF_SCRATCH, short_of_scratch=short)) for w in queue]
    # A job pinned to a node (a probe) may use any; the others only the nodes that take a team's job and
    # have the features they ask for.
    rooms: dict[tuple[bool, Constraint], list[FreeCapacity]] = {}
    shortfalls: dict[tuple[Request, bool, Constraint], tuple[WaitCode, dict[str, int]] | None] = {}
    left = []
    for position, waiting in enumerate(queue, start=1):
        if (capped_by := capped.get(waiting.job_id)) is not None:
            left.append(Unplaced(waiting, replace(capped_by, ahead=position - 1)))
            continue
        reservation = reserved.get(waiting.job_id)
        if (window := in_window.get(waiting.shape())) is not None:
            after = reservation.start if reservation is not None else window.end
            in_maintenance = Reason(WaitCode.MAINTENANCE, ahead=position - 1, start=window.start, detail=window.reason)
            left.append(Unplaced(waiting, in_maintenance, after))
            continue
        if reservation is not None:
            left.append(Unplaced(waiting, reserved_reason(reservation), reservation.start))
            continue
        pinned, constraint, request = waiting.node_id is not None, waiting.constraint, waiting.request
        if (pinned, constraint) not in rooms:
            rooms[pinned, constraint] = [
                n.free for n in pool.values() if (pinned or n.takes(None)) and constraint.allows(n.features)
            ]
        room = rooms[pinned, constraint]
        if not room:
            left.append(Unplaced(waiting, _no_room(waiting, pool, nodes)))
            continue
        key = (request, pinned, constraint)
        if key not in shortfalls:
            shortfalls[key] = None if any(fits(request, f) for f in room) else shortfall(request, room)
        why = shortfalls[key]
        if why is None and waiting.job_id in held_back:
            why = (WaitCode.BEHIND_RESERVATION, {})
        if why is None:
            left.append(Unplaced(waiting, Reason(WaitCode.IN_LINE, ahead=position - 1)))
        else:
            left.append(Unplaced(waiting, Reason(why[0], why[1], ahead=position - 1, short_of_scratch=short)))
    return left


def _no_room(waiting: Waiting, pool: dict[int, "_Node"], nodes: list[Node]) -> Reason:
    """Why no node taking work has room to consider: the features asked for (unless the nodes with them are
    only short of scratch space for now), or proving nodes."""
    featured = [n for n in pool.values() if waiting.constraint.allows(n.features)]
    if not featured:
        short = tuple(
            ShortOfScratch(n.name, n.scratch_free_mb, n.scratch_min_free_mb)
            for n in nodes
            if n.short_of_scratch and waiting.constraint.allows(frozenset(n.features))
        )
        if short:
            return Reason(WaitCode.SHORT_OF_SCRATCH, short_of_scratch=short)
        return Reason(
            WaitCode.MISSING_FEATURE, detail=",".join(closest_gap(waiting.constraint, [n.node for n in pool.values()]))
        )
    return Reason(WaitCode.PROVING, node=", ".join(n.node.name for n in featured if not n.takes(None)))


def reserved_reason(reservation: Reservation) -> Reason:
    """Where and when a job is reserved to start, and what its node must free first."""
    node, start, frees = reservation.node.name, reservation.start, reservation.frees
    if frees is None:
        return Reason(WaitCode.RESERVED_AFTER, node=node, start=start)
    return Reason(WaitCode.RESERVED, asdict(frees), node=node, start=start)


def shortfall(request: Request, free: list[FreeCapacity]) -> tuple[WaitCode, dict[str, int]]:
    """What no node has free now for the request, first of cores, memory, gpus."""
    for why, needs, largest_free in (
        (WaitCode.NEEDS_CORES, request.cpus, max(len(f.cpu_ids) for f in free)),
        (WaitCode.NEEDS_MEMORY, request.memory_mb, max(f.memory_mb for f in free)),
        (WaitCode.NEEDS_GPUS, request.gpus, max(len(f.gpu_ids) for f in free)),
    ):
        if needs > largest_free:
            return why, {"needs": needs, "largest_free": largest_free}
    return WaitCode.NOT_AT_ONCE, {}
