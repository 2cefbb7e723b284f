"""A running job's live use of its compute (Slurm's `sstat`): what its node last sampled of its container's
cgroup, kept in `Job.usage_now` while the job is at RUN and cleared when the run ends."""

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from jobs.models import Job, Stage


@dataclass(frozen=True)
class Reading:
    """A container's cgroup counters at one moment: cpu time used since it started, memory in use now."""

    clock: float  # time.monotonic() when read: intervals from it are not moved by the wall clock
    cpu_seconds: float
    memory_mb: int


@dataclass(frozen=True)
class Sample:
    """What `usage_now` holds: cpu use between two readings (100 = one core), memory in use at the later one."""

    cpu_percent: float
    memory_mb: int
    at: datetime

    def as_json(self) -> dict:
        return {"cpu_percent": self.cpu_percent, "memory_mb": self.memory_mb, "at": self.at.isoformat()}


def cpu_percent(before: Reading, after: Reading) -> float | None:
    """The cpu time used between two readings over the time between them, in percent of one core;
    None when no time passed. A counter that went back (a cgroup made again) counts as idle."""
    interval = after.clock - before.clock
    if interval <= 0:
        return None
    return round(max(after.cpu_seconds - before.cpu_seconds, 0.0) / interval * 100, 1)


def sample_between(before: Reading, after: Reading, *, at: datetime) -> Sample | None:
    percent = cpu_percent(before, after)
    return None if percent is None else Sample(cpu_percent=percent, memory_mb=max(after.memory_mb, 0), at=at)


def record_usage(job_id: uuid.UUID | str, sample: Sample, *, attempt: int) -> bool:
    """Keep a sample on the job while this attempt is at RUN; False when it no longer is, or when a transition
    holds its row: the UPDATE skips a locked row, as the loop that samples the run must not stall."""
    running = Job.objects.filter(pk=job_id, stage=Stage.RUN, attempt=attempt)
    unlocked = running.select_for_update(skip_locked=True).values("pk")
    with transaction.atomic():  # Django runs a FOR UPDATE only in one, though the UPDATE is a single statement
        return Job.objects.filter(pk__in=unlocked).update(usage_now=sample.as_json()) > 0


def clear_usage(job_id: uuid.UUID | str) -> None:
    """Forget the last sample: the run ended (or a new one starts, whose first sample is not in yet)."""
    Job.objects.filter(pk=job_id, usage_now__isnull=False).update(usage_now=None)
