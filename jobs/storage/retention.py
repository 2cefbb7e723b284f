"""Retention: a job's staged data and outputs leave the store days after its release; records and manifests stay.
The stored blobs it named rather than copied (a template's files) are not its own: freed only when unnamed."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from jobs.models import DataFile, Job
from jobs.storage.blobs import release
from jobs.storage.store import StoreUnavailable, delete_data, delete_outputs
from teams.models import Team


class PinRefused(Exception):
    """The team may not pin outputs (operators have not allowed it), or the files are gone already."""


def keep_days(team: Team) -> int:
    return team.retention_days if team.retention_days is not None else settings.E31_RETENTION_DAYS


@dataclass(frozen=True)
class Retention:
    deleted_at: datetime | None
    delete_after: datetime | None  # None: not released yet
    pinned_until: datetime | None
    can_pin: bool
    pin_days: int


def delete_after(job: Job) -> datetime | None:
    if job.released_at is None:
        return None
    due = job.released_at + timedelta(days=keep_days(job.team))
    return max(due, job.pinned_until) if job.pinned_until else due


def retention_of(job: Job) -> Retention:
    return Retention(
        deleted_at=job.files_deleted_at,
        delete_after=None if job.files_deleted_at else delete_after(job),
        pinned_until=job.pinned_until,
        can_pin=job.team.pin_days > 0 and job.files_deleted_at is None and job.released_at is not None,
        pin_days=job.team.pin_days,
    )


def pin(job: Job, *, now: datetime) -> Job:
    """Keep the job's files `team.pin_days` beyond their usual deletion."""
    if job.team.pin_days <= 0:
        raise PinRefused("Operators have not allowed this team to pin outputs.")
    if job.files_deleted_at is not None:
        raise PinRefused("The files of this job were deleted already.")
    if job.released_at is None:
        raise PinRefused("Pin a job's outputs once it is released.")
    until = job.released_at + timedelta(days=keep_days(job.team) + job.team.pin_days)
    Job.objects.filter(pk=job.pk).update(pinned_until=until)
    job.pinned_until = until
    return job


def due(now: datetime) -> list[Job]:
    """Released jobs whose files are past their retention (per team), not pinned beyond now."""
    jobs = Job.objects.ended().filter(files_deleted_at__isnull=True, released_at__isnull=False)
    found: list[Job] = []
    for team in Team.objects.filter(jobs__in=jobs).distinct():
        cutoff = now - timedelta(days=keep_days(team))
        batch = jobs.filter(team=team, released_at__lte=cutoff).exclude(pinned_until__gt=now).select_related("team")
        found.extend(batch)
    return found


def delete_due(*, now: datetime) -> list[Job]:
    """Delete the files of every job past retention, each claimed first so a second pass does nothing; return them."""
    deleted = []
    for job in due(now):
        with transaction.atomic():
            claimed = Job.objects.filter(pk=job.pk, files_deleted_at__isnull=True).update(files_deleted_at=now)
        if claimed != 1:
            continue
        try:
            delete_data(job.pk)
            delete_outputs(job.pk)
        except StoreUnavailable:  # not deleted: the next pass tries again, when the store may answer
            Job.objects.filter(pk=job.pk, files_deleted_at=now).update(files_deleted_at=None)
            raise
        # The blobs it named (a template's files) stay while a template or another job names them.
        release(DataFile.objects.filter(job=job, blob__isnull=False).values_list("blob_id", flat=True))
        job.files_deleted_at = now
        deleted.append(job)
    return deleted
