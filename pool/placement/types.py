"""The placement's values: what a job asks, what a node has free, what runs, and what a pass decides."""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pool.features import Constraint
from pool.models import Node
from pool.placement.reasons import Reason


@dataclass(frozen=True)
class Request:
    cpus: int
    memory_mb: int
    gpus: int


@dataclass(frozen=True)
class FreeCapacity:
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
    # Pool policy: its queue (pool.models.Queue) and that queue's priority, the node features it needs,
    # whether it may be preempted, and whether its queue may preempt lower ones.
    queue_id: int | None = None
    priority: int = 0
    constraint: Constraint = Constraint.ANY
    preemptable: bool = False
    preempts: bool = False

    def shape(self) -> tuple[Request, int, int | None, Constraint]:
        """What decides where and when it can start: jobs of one shape fare alike within a pass."""
        return (self.request, self.time_limit_s, self.node_id, self.constraint)


@dataclass(frozen=True)
class Running:
    """A hold that has not ended, and when it ends at the latest."""

    node_id: int
    cpu_ids: Sequence[int]
    memory_mb: int
    gpu_ids: Sequence[str]
    ends_at: datetime
    # Its job, as the queue limits and preemption see it (pool.preemption); None for a bare hold.
    job_id: uuid.UUID | None = None
    team_id: int | None = None
    queue_id: int | None = None
    priority: int = 0
    preemptable: bool = False
    started_at: datetime | None = None


@dataclass(frozen=True)
class QueueCaps:
    """What one team's jobs in a queue may hold at once (None: no limit)."""

    name: str
    cores: int | None = None
    jobs: int | None = None


@dataclass(frozen=True)
class Window:
    """A maintenance window on a node: no job is held there whose time limit runs into it."""

    start: datetime
    end: datetime
    reason: str

    def overlaps(self, start: datetime, end: datetime) -> bool:
        return self.start < end and self.end > start


@dataclass(frozen=True)
class Placement:
    job_id: uuid.UUID
    attempt: int
    node: Node
    cpu_set: list[int]
    gpu_ids: list[str]
    memory_mb: int


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
class Unplaced:
    """A job the pass did not place, why it waits, and when it will have started at the latest (a reservation)."""

    waiting: Waiting
    reason: Reason
    expected_start: datetime | None = None


@dataclass(frozen=True)
class PlacementPlan:
    placements: list[Placement]
    left: list[Unplaced]  # in queue order
    reservations: list[Reservation] = field(default_factory=list)
