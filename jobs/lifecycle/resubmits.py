"""Submitting a job again: the jobs that resubmit it, and the memory proposed for one that ran out of it."""

from dataclasses import dataclass

from django.db.models import Prefetch

from core.outcomes import Outcome
from jobs.lifecycle.retries import grown_memory_mb
from jobs.models import Job
from pool.nodes import pool_nodes

# A resubmit after running out of memory asks for this many times the memory it ran out at.
OUT_OF_MEMORY_FACTOR = 2


@dataclass(frozen=True)
class MemoryProposal:
    """The memory a resubmit of a job that ran out of it asks for, and why."""

    ran_out_at_mb: int
    proposed_mb: int

    @property
    def words(self) -> str:
        capped = " (the largest node's memory)" if self.proposed_mb < self.ran_out_at_mb * OUT_OF_MEMORY_FACTOR else ""
        return f"It ran out of memory at {self.ran_out_at_mb} MB; {self.proposed_mb} MB proposed{capped}."


def memory_proposal(job: Job) -> MemoryProposal | None:
    """For a job that ended out of memory: twice its memory, capped at the largest registered node's (as the form
    checks); None for any other end, or when no node has more."""
    if job.outcome != Outcome.OUT_OF_MEMORY:
        return None
    largest = max((n.memory_mb for n in pool_nodes()), default=0)
    proposed = grown_memory_mb(job.memory_mb, OUT_OF_MEMORY_FACTOR, largest_mb=largest)
    if proposed <= job.memory_mb:
        return None
    return MemoryProposal(ran_out_at_mb=job.memory_mb, proposed_mb=proposed)


def shown_resubmissions() -> Prefetch:
    """Each job's resubmissions, oldest first, into `shown_resubmissions`: one query for a whole list."""
    jobs = Job.objects.only("id", "name", "team_id", "resubmitted_from_id", "submitted_at")
    return Prefetch("resubmissions", queryset=jobs.order_by("submitted_at", "id"), to_attr="shown_resubmissions")


def resubmissions_of(job: Job) -> list[Job]:
    """The jobs of its team that resubmit `job`, oldest first (prefetched by shown_resubmissions, else read).
    One submitted again into another team of its person is that team's to show, not this one's."""
    found = getattr(job, "shown_resubmissions", None)
    if found is None:
        found = list(shown_resubmissions().queryset.filter(resubmitted_from=job))  # type: ignore[union-attr]
    return [r for r in found if r.team_id == job.team_id]


def resubmit_of(job: Job) -> Job | None:
    """The job of its team that `job` resubmits, or None (none, or another team's: not shown here)."""
    earlier = job.resubmitted_from
    return earlier if earlier is not None and earlier.team_id == job.team_id else None
