"""Placement: which waiting job goes on which node and cores, a pure function so the pass owns locks and writes.

- `types`: the values it works on and decides (a request, free capacity, waiting and running jobs, a plan);
- `backfill`: the order the queue is served in and backfill with reservations (`serve_order`, `place`);
- `reasons`: why a job waits (`Reason`, `WaitCode`) and the words of it (`reason_text`)."""

from pool.placement.backfill import (
    RESERVATIONS,
    closest_gap,
    fits,
    never_fits,
    place,
    reserved_reason,
    serve_order,
    shortfall,
)
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

__all__ = [
    "FreeCapacity",
    "Placement",
    "PlacementPlan",
    "QueueCaps",
    "RESERVATIONS",
    "Reason",
    "Request",
    "Reservation",
    "Running",
    "ShortOfScratch",
    "Unplaced",
    "WaitCode",
    "Waiting",
    "Window",
    "closest_gap",
    "fits",
    "never_fits",
    "place",
    "reserved_reason",
    "serve_order",
    "shortfall",
]
