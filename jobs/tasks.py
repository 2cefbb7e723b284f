"""Celery tasks: thin adapters that take ids and call the domain functions."""

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from jobs import recovery, runner
from jobs.dispatch import schedule_and_dispatch


@shared_task(name="jobs.schedule")
def schedule_jobs() -> int:
    return schedule_and_dispatch()


@shared_task(name="jobs.reap")
def reap_lost_nodes() -> list[str]:
    return recovery.reap(now=timezone.now())


@shared_task(name="jobs.run")
def run_job(job_id: str) -> None:
    runner.run(job_id, node_name=settings.E31_NODE_NAME)
