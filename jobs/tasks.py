"""Celery tasks of the jobs app: thin adapters that call jobs.actions."""

from celery import shared_task

from jobs.actions import schedule_pass


@shared_task(name="jobs.schedule")
def schedule_jobs() -> int:
    return len(schedule_pass())
