"""The figures pages show of a job (waits, cost, efficiency, timeline) and of the pool beside the submit form."""

import hashlib
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db.models import OuterRef, Subquery
from django.db.models.functions import Coalesce

from accounting.models import Record
from jobs.models import Job, JobEvent, Stage
from pool.models import Node
from pool.nodes import free_capacity

# A job that used less than this share of the cpu time or memory it held asked for too much.
OVER_ASKED_BELOW = 0.5
# Below this many seconds held, a job's efficiency says nothing (start-up dominates).
EFFICIENCY_AFTER_S = 10


def state_key(job: Job) -> str:
    """A short key that changes when the job page's live part would."""
    parts = [job.stage, job.outcome, job.cancel_requested, job.queue_position, job.wait_reason, job.expected_start,
             job.attempt, job.held_at, job.started_at, job.finished_at]  # fmt: skip
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Figures:
    queue_wait: timedelta | None
    run_time: timedelta | None
    cost: Decimal | None
    cpu_used: float | None  # cpu time used / cpu time held, 0..1
    memory_used: float | None  # peak memory / memory held, 0..1

    @property
    def over_asked(self) -> bool:
        return any(share is not None and share < OVER_ASKED_BELOW for share in (self.cpu_used, self.memory_used))


def figures(job: Job, records: list[Record] | None = None) -> Figures:
    """A job's wait for its first hold, run time, cost (all its attempts) and efficiency (its last attempt)."""
    if records is None:
        records = getattr(job, "record_list", None)
        if records is None:
            records = list(job.records.order_by("sequence"))
    last = records[-1] if records else None
    cpu_used = memory_used = None
    if last is not None and last.held_seconds >= EFFICIENCY_AFTER_S:
        cpu_used = float(last.cpu_seconds) / (float(last.held_seconds) * max(last.cpus, 1))
        if last.memory_peak_mb is not None and last.memory_mb:
            memory_used = last.memory_peak_mb / last.memory_mb
    first_held = records[0].held_at if records else job.held_at
    return Figures(
        queue_wait=first_held - job.submitted_at if first_held else None,
        run_time=job.finished_at - job.started_at if job.started_at and job.finished_at else None,
        cost=sum((r.cost for r in records), Decimal(0)) if records else None,
        cpu_used=cpu_used,
        memory_used=memory_used,
    )


def first_held_at() -> Coalesce:
    """The end of a job's queue_wait as SQL, for a list to annotate its rows with: its first record's
    held_at, else its hold's."""
    first = Record.objects.filter(job=OuterRef("pk")).order_by("sequence").values("held_at")[:1]
    return Coalesce(Subquery(first), "held_at")


def timeline(job: Job, history: list[JobEvent]) -> list[dict]:
    """The five steps of the job's current attempt, each with when it was reached and how long the step
    before took; a retried attempt starts when it went back to the queue, as its history says."""
    requeued = next((e.at for e in reversed(history) if e.stage == Stage.SUBMIT), None)
    reached = [job.submitted_at if job.attempt == 1 else requeued, job.held_at, job.started_at, job.finished_at,
               job.released_at]  # fmt: skip
    return [
        {"step": step, "at": at, "took": at - before if at and before else None}
        for step, at, before in zip(Stage, reached, [None, *reached[:-1]], strict=True)
    ]


def pool_now() -> dict[str, Any]:
    """The largest node, and the most a node can give now."""
    nodes = [n for n in Node.objects.all() if n.state == Node.State.ACTIVE] or list(Node.objects.all())
    if not nodes:
        return {}
    free = free_capacity(nodes).values()
    return {
        "largest": {"cpus": max(n.cpus for n in nodes), "memory_mb": max(n.memory_mb for n in nodes),
                    "gpus": max(n.gpus for n in nodes)},
        "free": {"cpus": max(len(f.cpu_ids) for f in free), "memory_mb": max(f.memory_mb for f in free),
                 "gpus": max(len(f.gpu_ids) for f in free)},
    }  # fmt: skip
