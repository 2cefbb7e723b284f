"""A running job's live use (Slurm's `sstat`): its container's cgroup read every E31_USAGE_SAMPLE_S by
the loop that watches the run, each sample kept on the job (jobs.lifecycle.usage)."""

import logging
import time

from django.conf import settings
from django.utils import timezone

from jobs.lifecycle.usage import Reading, record_usage, sample_between
from jobs.models import Job
from worker import database
from worker.sandbox import Sandbox, run_key

log = logging.getLogger(__name__)
FIRST_SAMPLE_S = 1.0  # the first sample comes this soon after the watch starts, so a page shows use at once


class Sampler:
    """Reads the run's cgroup when a sample is due, never failing the run: an unreadable cgroup gives no sample."""

    def __init__(self, sandbox: Sandbox, job: Job):
        self.sandbox, self.job_id, self.attempt = sandbox, job.pk, job.attempt
        self.run_key = run_key(job.pk, job.attempt)
        self.every_s: float = settings.E31_USAGE_SAMPLE_S
        self.last: Reading | None = self.sandbox.reading(self.run_key)
        self.due = time.monotonic() + min(FIRST_SAMPLE_S, self.every_s)
        self.broken = False

    def poll(self) -> None:
        if self.broken or time.monotonic() < self.due:
            return
        self.due = time.monotonic() + self.every_s
        try:
            self._sample()
        except database.DROPPED:
            pass  # the watch loop's own queries say the database is away
        except Exception:
            log.exception("job %s: sampling its run's use failed; no more samples of this run", self.job_id)
            self.broken = True

    def _sample(self) -> None:
        reading = self.sandbox.reading(self.run_key)
        if reading is None:
            return
        before, self.last = self.last, reading
        if before is None:
            return
        sample = sample_between(before, reading, at=timezone.now())
        if sample is not None:
            database.once_more(lambda: record_usage(self.job_id, sample, attempt=self.attempt))
