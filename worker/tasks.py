"""Celery tasks of the machine side: thin adapters that take ids and call the node's functions."""

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from worker import reaper, runner


@shared_task(name="worker.run")
def run_job(job_id: str) -> None:
    runner.run(job_id, node_name=settings.E31_NODE_NAME)


@shared_task(name="worker.reap")
def reap_lost_nodes() -> list[str]:
    return reaper.reap_lost_nodes(now=timezone.now())
