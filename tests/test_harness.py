"""The suite's own promises: in-process tests never reach the broker, and a worker is quiet while
the database is flushed (a scheduler pass caught by TRUNCATE deadlocks with it)."""

import pytest
import redis
from django.conf import settings

from e31site.celery import app
from tests import conftest
from tests.conftest import STACK_NODE
from tests.factories import submit_job
from tests.workers import quiesce_all, resume_all


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


def queues_of(worker) -> set[str]:
    active = app.control.inspect(destination=[worker.hostname], timeout=5).active_queues() or {}
    return {q["name"] for q in active.get(worker.hostname, [])}


@pytest.mark.celery
def test_a_quiesced_worker_consumes_no_queue_until_resumed(worker_process, platform_plane):
    quiesce_all(app)
    assert queues_of(worker_process) == set()
    assert all(queues_of(worker) == set() for worker in platform_plane.workers.values())

    resume_all(app)
    assert queues_of(worker_process) == {f"node.{STACK_NODE}"}
    assert {kind: queues_of(worker) for kind, worker in platform_plane.workers.items()} == {
        kind: {f"platform.{kind}"} for kind in settings.E31_PLATFORM_TASKS
    }
