"""Who may see which job: every page and endpoint goes through here; outsiders get 404."""

import uuid

from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from jobs.models import Job, OutputFile
from teams.access import AnyUser, teams_of


def visible_jobs(user: AnyUser) -> QuerySet[Job]:
    return Job.objects.filter(team__in=teams_of(user))


def job_for(user: AnyUser, job_id: uuid.UUID | str | None) -> Job:
    return job_in(visible_jobs(user).select_related("team", "image", "cancelled_by", "queue"), job_id)


def job_in(jobs: QuerySet[Job], job_id: uuid.UUID | str | None) -> Job:
    """The job of that id among `jobs` (a query built on visible_jobs), else 404."""
    if job_id is None:  # an action called without its URL's id
        raise Http404("No such job.")
    try:
        return jobs.get(pk=job_id)
    except (Job.DoesNotExist, ValidationError, ValueError, TypeError):  # a malformed id is no job either
        raise Http404("No such job.") from None


def output_for(user: AnyUser, job_id: uuid.UUID | str | None, path: str) -> OutputFile:
    """The output at `path` of a job the user may see, its `job` with it; else 404 (the job's first, as job_for)."""
    return get_object_or_404(job_for(user, job_id).output_files, path=path)


def visible_jobs_by_team_ids(user: AnyUser) -> QuerySet[Job]:
    """visible_jobs by team ids as values, so PostgreSQL walks the lists' (team, time) indexes instead of sorting."""
    return Job.objects.filter(team_id__in=list(teams_of(user).values_list("pk", flat=True)))
