"""Celery tasks of the jobs app: thin adapters that call jobs.actions."""

from celery import shared_task
from django.utils import timezone

from jobs.actions import redispatch_stale_runs, schedule_pass


@shared_task(name="jobs.schedule")
def schedule_jobs() -> int:
    held = len(schedule_pass())
    redispatch_stale_runs(now=timezone.now())
    return held
