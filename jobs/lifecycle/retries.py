"""Retry rules: whether an attempt that ended so goes back to the queue, asking for what, and when; and the
attempts a job has had. jobs.lifecycle.actions applies them at each way an attempt ends (its release, its node lost)."""

import math
from datetime import datetime, timedelta
from typing import Any

from core.outcomes import Outcome
from jobs.models import Job

# What `retry_on` may name besides exit codes: the ends a retry can mend.
RETRYABLE = (Outcome.FAILED, Outcome.OUT_OF_MEMORY, Outcome.TIMED_OUT, Outcome.NODE_LOST)
MAX_DELAY_S = 24 * 3600  # a doubled delay never waits more than a day


def wanted(job: Job, *, outcome: str, exit_code: int | None) -> bool:
    """Whether this attempt's end is one the job retries on, with attempts left and no cancel asked."""
    if retried(job) > job.max_retries or job.cancel_requested or outcome == Outcome.SUCCEEDED:
        return False
    rules = {str(rule) for rule in job.retry_on}
    return outcome in rules or (exit_code is not None and str(exit_code) in rules)


def next_memory_mb(job: Job, *, outcome: str, largest_mb: int) -> int:
    """The next attempt's memory: more by `retry_memory_factor` after running out, capped by the largest node."""
    if outcome != Outcome.OUT_OF_MEMORY or job.retry_memory_factor <= 1:
        return job.memory_mb
    return grown_memory_mb(job.memory_mb, job.retry_memory_factor, largest_mb=largest_mb)


def grown_memory_mb(memory_mb: int, factor: float, *, largest_mb: int) -> int:
    """`memory_mb` times `factor` (rounded up) after running out of it, capped by the largest node, never less."""
    return max(memory_mb, min(math.ceil(memory_mb * factor), largest_mb))


def not_before(job: Job, *, now: datetime) -> datetime | None:
    """When the next attempt may be held: `retry_delay_s` after the first attempt, doubling each one after."""
    if not job.retry_delay_s:
        return None
    return now + timedelta(seconds=min(job.retry_delay_s * 2 ** (retried(job) - 1), MAX_DELAY_S))


def retried(job: Job) -> int:
    """The attempts that count against max_retries (this one included): not those lost to a preemption."""
    return job.attempt - job.preemptions


def ended(job: Job, *, outcome: str, exit_code: int | None, reason: str, memory_mb: int,
          held_at: datetime | None, released_at: datetime | None) -> dict[str, Any]:  # fmt: skip
    """The attempt as `past_attempts` keeps it."""
    return {
        "attempt": job.attempt, "outcome": outcome, "exit_code": exit_code, "reason": reason,
        "memory_mb": memory_mb, "held_at": _iso(held_at), "released_at": _iso(released_at),
    }  # fmt: skip


def attempts_of(job: Job) -> list[dict[str, Any]]:
    """Every attempt, oldest first: those kept as they ended, then the current one as the job is now."""
    current = ended(
        job, outcome=job.outcome, exit_code=job.exit_code, reason=job.reason, memory_mb=job.memory_mb,
        held_at=job.held_at, released_at=job.released_at,
    )  # fmt: skip
    return [*job.past_attempts, current]


def _iso(moment: datetime | None) -> str | None:
    """As the API writes every moment (DRF's DateTimeField): UTC as Z."""
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else None
