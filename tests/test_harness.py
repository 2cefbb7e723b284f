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
    return redis.Redis.from_url(settings.CELERY_BROKER_URL).llen("e31")


def test_an_in_process_submission_keeps_its_message_instead_of_sending_it(
    member, team, django_capture_on_commit_callbacks
):
    before, kept = broker_backlog(), len(conftest.SENT)

    with django_capture_on_commit_callbacks(execute=True):
        submit_job(member, team)

    assert conftest.SENT[kept:] == [("jobs.schedule", None, None)]
    assert broker_backlog() == before


@pytest.mark.celery
def test_a_quiesced_worker_consumes_no_queue_until_resumed(worker_process):
    def queues() -> set[str]:
        active = app.control.inspect(destination=[worker_process.hostname], timeout=5).active_queues() or {}
        return {q["name"] for q in active.get(worker_process.hostname, [])}

    quiesce_all(app)
    assert queues() == set()

    resume_all(app)
    assert queues() == {"e31", f"node.{STACK_NODE}"}
