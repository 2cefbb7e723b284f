"""The queue as the jobs app keeps it: who is waiting, and where each stands after a pass."""

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from jobs.models import Job, Stage
from pool.features import BadConstraint, Constraint
from pool.features import parse as parse_constraint
from pool.placement import reasons
from pool.placement.types import Request, Unplaced, Waiting
from pool.preemption import preemptable
from pool.scheduler import Queues

# What the last pass stored for a waiting job: (queue_position, wait_reason, expected_start).
Stored = dict[uuid.UUID, tuple[int | None, str, datetime | None]]


def waiting_jobs(*, now: datetime | None = None) -> QuerySet[Job]:
    """The jobs a pass may hold: not held back by their dependencies or array, nor by a retry's delay."""
    due = Q(not_before__isnull=True) | Q(not_before__lte=now or timezone.now())
    return Job.objects.waiting().filter(due, held_back=False, cancel_requested=False)


def waiting(*, now: datetime, queues: Queues | None = None) -> tuple[list[Waiting], Stored]:
    """The waiting jobs as the scheduler sees them, and each one's stored (position, reason, expected start)."""
    rows = waiting_jobs(now=now).values_list(
        "pk", "team_id", "submitted_at", "attempt", "cpus", "memory_mb", "gpus", "time_limit_s",
        "queue_position", "wait_reason", "expected_start", "pinned_node_id", "array_index",
        "queue_id", "constraint", "preemptable", "preemptions", named=True,
    )  # fmt: skip
    queues = queues or Queues.read()
    constraints: dict[str, Constraint] = {}
    jobs, stored = [], {}
    for row in rows:
        policy = queues.of(row.queue_id)
        if row.constraint not in constraints:
            constraints[row.constraint] = _constraint(row.constraint)
        jobs.append(Waiting(
            row.pk, row.team_id, row.submitted_at, row.attempt, Request(row.cpus, row.memory_mb, row.gpus),
            row.time_limit_s, row.pinned_node_id, rank=row.array_index or 0,
            queue_id=policy.pk if policy else None, priority=policy.priority if policy else 0,
            constraint=constraints[row.constraint],
            preemptable=preemptable(declared=row.preemptable, queue=policy, preemptions=row.preemptions),
            preempts=policy is not None and policy.preempts_for(row.team_id),
        ))  # fmt: skip
        stored[row.pk] = (row.queue_position, row.wait_reason, row.expected_start)
    return jobs, stored


def _constraint(text: str) -> Constraint:
    """A stored constraint, checked at submit; one that no longer parses (a rule made stricter) asks for itself
    as one feature, which no node has: the pass rejects the job naming it rather than run it anywhere."""
    try:
        return parse_constraint(text)
    except BadConstraint:
        return Constraint((frozenset({text}),))


@dataclass(frozen=True)
class LeftWaiting:
    """A job the pass left waiting, its reason in words (pool.placement.reasons) as its row keeps it."""

    waiting: Waiting
    reason: str
    expected_start: datetime | None


def left_waiting(unplaced: list[Unplaced], *, now: datetime) -> list[LeftWaiting]:
    """The jobs the pass did not place, each with its reason in words, as their rows keep them."""
    return [LeftWaiting(job.waiting, reasons.reason_text(job.reason, now=now), job.expected_start) for job in unplaced]


# One statement for any number of rows: bulk_update's CASE per row is slow when a long queue shifts.
_UPDATE_POSITIONS = """
    UPDATE jobs_job SET queue_position = v.position, wait_reason = v.reason, expected_start = v.expected_start
    FROM unnest(%s::uuid[], %s::integer[], %s::text[], %s::timestamptz[]) AS v(id, position, reason, expected_start)
    WHERE jobs_job.id = v.id AND jobs_job.stage = 'submit'
"""


def store_positions(left: list[LeftWaiting], stored: Stored) -> int:
    """Write each waiting job's place, reason and expected start where they changed; under the pass's pool lock."""
    changed = [
        (job.waiting.job_id, position, job.reason[:300], job.expected_start)
        for position, job in enumerate(left, start=1)
        if stored.get(job.waiting.job_id) != (position, job.reason[:300], job.expected_start)
    ]
    if not changed:
        return 0
    if connection.vendor == "postgresql":  # unnest has no SQLite twin; bulk_update is the portable way, slower
        ids, positions, reasons, starts = (list(column) for column in zip(*changed, strict=True))
        with connection.cursor() as cursor:
            cursor.execute(_UPDATE_POSITIONS, [ids, positions, reasons, starts])
    else:
        rows = [
            Job(pk=pk, queue_position=position, wait_reason=why, expected_start=start)
            for pk, position, why, start in changed
        ]
        Job.objects.bulk_update(rows, ["queue_position", "wait_reason", "expected_start"], batch_size=500)
    return len(changed)


def standing(job: Job) -> dict | None:
    """Where a waiting job stands as the last pass stored it; None out of the queue or before a pass saw it."""
    if job.stage != Stage.SUBMIT or job.queue_position is None:
        return None
    return {
        "position": job.queue_position,
        "queued": waiting_jobs().count(),
        "reason": job.wait_reason,
        "expected_start": job.expected_start,
    }
