"""The suite's own promises: in-process tests never reach the broker, and a worker is quiet while
the database is flushed (a scheduler pass caught by TRUNCATE deadlocks with it)."""

from functools import partial

import pytest
import redis
from django.conf import settings

from e31site.celery import app
from tests import conftest
from tests.conftest import STACK_NODE
from tests.factories import submit_job
from tests.workers import quiesce_all, resume_all, wait_until


def broker_backlog() -> int:
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    return sum(broker.llen(queue) for queue in settings.E31_PLATFORM_QUEUES.values())


def test_an_in_process_submission_keeps_its_message_instead_of_sending_it(
    member, team, django_capture_on_commit_callbacks
):
    before, kept = broker_backlog(), len(conftest.SENT)

    with django_capture_on_commit_callbacks(execute=True):
        submit_job(member, team)

    assert conftest.SENT[kept:] == [("jobs.schedule", None, None)]
    assert broker_backlog() == before


def queues_of(worker) -> set[str] | None:
    """The queues the worker says it consumes, or None when it did not answer in time (a loaded machine):
    no answer is not an empty set."""
    active = app.control.inspect(destination=[worker.hostname], timeout=5).active_queues() or {}
    return {q["name"] for q in active[worker.hostname]} if worker.hostname in active else None


def consumes(worker, queues: set[str]) -> bool:
    return queues_of(worker) == queues


@pytest.mark.celery
def test_a_quiesced_worker_consumes_no_queue_until_resumed(worker_process, platform_plane):
    quiesce_all(app)
    expected = {worker_process: {f"node.{STACK_NODE}"}}
    expected |= {worker: {f"platform.{kind}"} for kind, worker in platform_plane.workers.items()}
    # Each worker is asked until it answers: a loaded machine delays its answer and a consumer's return.
    for worker in expected:
        wait_until(partial(consumes, worker, set()), 60, 0.5, message=f"{worker.hostname} to consume nothing")

    resume_all(app)
    for worker, queues in expected.items():
        wait_until(partial(consumes, worker, queues), 60, 0.5, message=f"{worker.hostname} to consume {queues}")
