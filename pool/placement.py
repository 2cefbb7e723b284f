"""Placement: which waiting job goes on which node and cores, a pure function so the pass owns locks and writes."""

import bisect
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TypeVar

from pool.models import Node

# Blocked jobs a pass reserves for: more keep big jobs from being overtaken, fewer leave more to backfill.
RESERVATIONS = 4

T = TypeVar("T", int, str)


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
    job_id: uuid.UUID
    team_id: int
    submitted_at: datetime
    attempt: int
    request: Request
    time_limit_s: int
    node_id: int | None = None  # the one node it may run on (an isolation probe); None: any
    rank: int = 0  # its place among the jobs submitted with it (an array's index): served in that order


@dataclass(frozen=True)
class Running:
    """A hold that has not ended, and when it ends at the latest."""

    node_id: int
    cpu_ids: Sequence[int]
    memory_mb: int
    gpu_ids: Sequence[str]
    ends_at: datetime


@dataclass(frozen=True)
class Placement:
    job_id: uuid.UUID
    attempt: int
    node: Node
    cpu_set: list[int]
    gpu_ids: list[str]
    memory_mb: int


class Why(StrEnum):
    """Why a job waits; each code's numbers are named beside it."""

    NO_NODE = "no_node"  # no node is accepting work
    SHORT_OF_SCRATCH = "short_of_scratch"  # every accepting node is short of scratch space
    RESERVED = "reserved"  # node, start; cpus, memory_mb, gpus: what the node must free first
    RESERVED_AFTER = "reserved_after"  # node, start: it starts when a reserved job ahead ends
    NEEDS_CORES = "needs_cores"  # needs, largest_free
    NEEDS_MEMORY = "needs_memory"  # needs, largest_free (MB)
    NEEDS_GPUS = "needs_gpus"  # needs, largest_free
    NOT_AT_ONCE = "not_at_once"  # no single node has all of it free at once
    BEHIND_RESERVATION = "behind_reservation"  # starting now would delay a reserved job ahead
    IN_LINE = "in_line"  # it fits: only the jobs ahead in the queue go first
    NEVER_FITS = "never_fits"  # cpus, memory_mb, gpus; largest_cpus, largest_memory_mb, largest_gpus
    PROVING = "proving"  # node: the nodes with room take no team's job until their isolation probes pass


@dataclass(frozen=True)
class ShortOfScratch:
    node: str
    free_mb: int | None  # never None on a node short of it (pool.models.Node.short_of_scratch)
    keeps_mb: int


@dataclass(frozen=True)
class Reason:
    """Why a job waits, with no words: they are made where they are shown (jobs.reasons)."""

    code: Why
    numbers: Mapping[str, int] = field(default_factory=dict)
    ahead: int = 0  # jobs ahead of it in the queue
    node: str = ""  # the node reserved on
    start: datetime | None = None  # when the reservation starts
    short_of_scratch: tuple[ShortOfScratch, ...] = ()  # nodes left out for want of scratch space


@dataclass(frozen=True)
class Reservation:
    """Compute set aside for a job that does not fit yet, from when it is free at the latest."""

    job_id: uuid.UUID
    node: Node
    cpu_ids: frozenset[int]
    memory_mb: int
    gpu_ids: frozenset[str]
    start: datetime
    end: datetime
    frees: Request | None  # what must free up on the node first (None: it waits for a reserved job ahead)


@dataclass(frozen=True)
class Left:
    waiting: Waiting
    reason: Reason
    expected_start: datetime | None = None


@dataclass(frozen=True)
class Plan:
    placements: list[Placement]
    left: list[Left]  # in queue order
    reservations: list[Reservation] = field(default_factory=list)


def fits(request: Request, free: Free) -> bool:
    return (
        len(free.cpu_ids) >= request.cpus and free.memory_mb >= request.memory_mb and len(free.gpu_ids) >= request.gpus
    )


def never_fits(request: Request, nodes: list[Node]) -> Reason | None:
    """Why no node of the pool could ever give this much, or None when one could."""
    if not nodes:
        return None  # an empty pool says nothing yet: nodes register when their workers start
    if any(fits(request, Free(n.cpu_ids, n.memory_mb, n.gpu_ids)) for n in nodes):
        return None
    largest = {f"largest_{name}": max(getattr(n, name) for n in nodes) for name in ("cpus", "memory_mb", "gpus")}
    return Reason(Why.NEVER_FITS, {**asdict(request), **largest})


def place(
    queue: list[Waiting],
    nodes: list[Node],
    free: dict[int, Free],
    *,
    running: Sequence[Running],
    now: datetime,
    limit: int,
    reservations: int = RESERVATIONS,
) -> Plan:
    """Place up to `limit` jobs in queue order on their best-fit nodes, with backfill behind reservations as Slurm's.

    1. A job that may start now takes the node with the fewest free cores, then memory, that fits it,
       and its lowest free ids; it then counts as a hold ending at now + its time limit.
    2. The first `reservations` jobs that may not get the earliest moment a node has their request
       for their whole time limit.
    3. A job behind may start first only where it cannot delay a reservation: it ends before the
       reservation starts, or takes only what the reservation does not need.
    """
    # A node short of scratch space takes no job and is reserved for by none until it has it again.
    pool = {n.pk: _Node(n, free[n.pk], now) for n in nodes if not n.short_of_scratch}
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
    blocked: set[tuple[Request, int, int | None]] = set()
    held_back: set[uuid.UUID] = set()  # considered, and could not start now
    unreservable: set[tuple[Request, int, int | None]] = set()  # no active node could ever hold it
    for waiting in queue:
        if len(placements) >= limit or (not order and len(made) >= reservations):
            break
        request = waiting.request
        shape = (request, waiting.time_limit_s, waiting.node_id)
        if order and shape not in blocked:
            end = now + timedelta(seconds=waiting.time_limit_s)
            taken = _take_now(order, pool, request, end, only=waiting.node_id)
            if taken is not None:
                node, cpu_set, gpu_ids = taken
                placements.append(Placement(waiting.job_id, waiting.attempt, node.node, cpu_set, gpu_ids,
                                            request.memory_mb))  # fmt: skip
                del order[bisect.bisect_left(order, node.key())]
                node.take(cpu_set, request.memory_mb, gpu_ids, end)
                if node.free.cpu_ids:
                    bisect.insort(order, node.key())
                continue
            blocked.add(shape)
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
    left = _reasons(unplaced, nodes, pool, reserved, held_back=held_back)
    return Plan(placements=placements, left=left, reservations=made)


class _Node:
    """One node over the pass: what is free now, what frees up when, and what is reserved."""

    def __init__(self, node: Node, free: Free, now: datetime) -> None:
        self.node = node
        self.cpu_ids, self.gpu_ids = set(node.cpu_ids), set(node.gpu_ids)
        self.free = free
        self.now = now
        # (ends at, cores, memory, gpus) of each running hold and of each job placed in this pass.
        self.ends: list[tuple[datetime, Sequence[int], int, Sequence[str]]] = []
        self.ends_sorted = True
        self.reservations: list[Reservation] = []
        self.memory_then: dict[datetime, int] = {}

    def takes(self, pinned_to: int | None) -> bool:
        """Whether it takes a job pinned to `pinned_to` (None: any node): a proving node only its own."""
        return self.node.state != Node.State.PROVING or pinned_to == self.node.pk

    def key(self) -> tuple[int, int, str, int]:
        return (len(self.free.cpu_ids), self.free.memory_mb, self.node.name, self.node.pk)

    def add_end(self, at: datetime, cpu_ids: Sequence[int], memory_mb: int, gpu_ids: Sequence[str]) -> None:
        # A hold past its time limit ends any moment now: its job is being stopped.
        self.ends.append((max(at, self.now), cpu_ids, memory_mb, gpu_ids))
        self.ends_sorted = False
        self.memory_then.clear()

    def take(self, cpu_set: list[int], memory_mb: int, gpu_ids: list[str], end: datetime) -> None:
        self.free = Free(_without(self.free.cpu_ids, cpu_set), self.free.memory_mb - memory_mb,
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
        """The earliest moment (before `before`) something ends and the job then fits here for its time limit.

        Memory is checked at the start and at each reservation starting during the run: holds only give it back.
        """
        node = self.node
        if node.cpus < request.cpus or node.memory_mb < request.memory_mb or node.gpus < request.gpus:
            return None
        ends = self.sorted_ends()
        moments = sorted({self.now, *(at for at, *_ in ends), *(r.end for r in self.reservations)})
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
    request: Request,
    end: datetime,
    *,
    only: int | None = None,
) -> tuple["_Node", list[int], list[str]] | None:
    """The best-fit node (`only`, when given) where the job may start now, with its cores and gpus."""
    for _, memory_mb, _, pk in order[bisect.bisect_left(order, (request.cpus,)) :]:
        if memory_mb < request.memory_mb or (only is not None and pk != only):
            continue
        node = pool[pk]
        if not node.takes(only):
            continue
        usable = node.usable_now(request, end)
        if usable is not None:
            return node, *usable
    return None


def _reserve(waiting: Waiting, pool: dict[int, "_Node"], now: datetime) -> Reservation | None:
    """A reservation on the node where the job can start earliest."""
    request = waiting.request
    best: tuple[datetime, _Node, list[int], list[str]] | None = None
    for node in pool.values():
        if (waiting.node_id is not None and node.node.pk != waiting.node_id) or not node.takes(waiting.node_id):
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
) -> list[Left]:
    if not nodes:
        return [Left(w, Reason(Why.NO_NODE)) for w in queue]
    short = tuple(ShortOfScratch(n.name, n.scratch_free_mb, n.scratch_min_free_mb) for n in nodes if n.short_of_scratch)
    if not pool:
        return [Left(w, Reason(Why.SHORT_OF_SCRATCH, short_of_scratch=short)) for w in queue]
    # A job pinned to a node (a probe) may use any; the others only the nodes that take a team's job.
    rooms = {True: [n.free for n in pool.values()], False: [n.free for n in pool.values() if n.takes(None)]}
    proving = ", ".join(n.node.name for n in pool.values() if not n.takes(None))
    shortfalls: dict[tuple[Request, bool], tuple[Why, dict[str, int]] | None] = {}
    left = []
    for position, waiting in enumerate(queue, start=1):
        reservation = reserved.get(waiting.job_id)
        if reservation is not None:
            left.append(Left(waiting, reserved_reason(reservation), reservation.start))
            continue
        request, room = waiting.request, rooms[waiting.node_id is not None]
        if not room:
            left.append(Left(waiting, Reason(Why.PROVING, node=proving)))
            continue
        key = (request, waiting.node_id is not None)
        if key not in shortfalls:
            shortfalls[key] = None if any(fits(request, f) for f in room) else shortfall(request, room)
        why = shortfalls[key]
        if why is None and waiting.job_id in held_back:
            why = (Why.BEHIND_RESERVATION, {})
        if why is None:
            left.append(Left(waiting, Reason(Why.IN_LINE, ahead=position - 1)))
        else:
            left.append(Left(waiting, Reason(why[0], why[1], ahead=position - 1, short_of_scratch=short)))
    return left


def reserved_reason(reservation: Reservation) -> Reason:
    """Where and when a job is reserved to start, and what its node must free first."""
    node, start, frees = reservation.node.name, reservation.start, reservation.frees
    if frees is None:
        return Reason(Why.RESERVED_AFTER, node=node, start=start)
    return Reason(Why.RESERVED, asdict(frees), node=node, start=start)


def shortfall(request: Request, free: list[Free]) -> tuple[Why, dict[str, int]]:
    """What no node has free now for the request, first of cores, memory, gpus."""
    for why, needs, largest_free in (
        (Why.NEEDS_CORES, request.cpus, max(len(f.cpu_ids) for f in free)),
        (Why.NEEDS_MEMORY, request.memory_mb, max(f.memory_mb for f in free)),
        (Why.NEEDS_GPUS, request.gpus, max(len(f.gpu_ids) for f in free)),
    ):
        if needs > largest_free:
            return why, {"needs": needs, "largest_free": largest_free}
    return Why.NOT_AT_ONCE, {}
