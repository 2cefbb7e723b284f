"""Celery tasks of the jobs app: thin adapters that call jobs.actions."""

from celery import shared_task
from django.utils import timezone

from jobs.actions import redispatch_stale_runs, schedule_pass
from jobs.dispatch import schedule_request_taken
from jobs.retention import delete_due


@shared_task(name="jobs.schedule")
def schedule_jobs() -> int:
    schedule_request_taken()  # before the pass reads the queue: a job committed after it nudges again
    held = len(schedule_pass())
    redispatch_stale_runs(now=timezone.now())
    return held


@shared_task(name="jobs.retention")
def apply_retention() -> int:
    """Delete the staged data and outputs of the jobs past retention (jobs.retention)."""
    return len(delete_due(now=timezone.now()))
