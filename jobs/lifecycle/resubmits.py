"""Submitting a job again: the job a resubmit submits again, and the jobs that resubmit it."""

from django.db.models import Prefetch

from jobs.models import Job


def shown_resubmissions() -> Prefetch:
    """Each job's resubmissions, oldest first, into `shown_resubmissions` (one query for a whole list): only
    their id, name, team and time are read."""
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
