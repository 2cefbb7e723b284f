"""How work reaches the nodes: each held job's run goes to its node's queue; passes are requested.

Tasks are sent by name: the run task belongs to the machine side (worker.tasks), which calls down
into jobs, never the other way round.
"""

import logging
import uuid

from celery import current_app
from django.db import transaction

log = logging.getLogger(__name__)

RUN_TASK = "worker.run"
SCHEDULE_TASK = "jobs.schedule"


def send(task: str, *, args: list[str] | None = None, queue: str | None = None) -> None:
    """The one place a message leaves for the broker."""
    current_app.send_task(task, args=args or [], queue=queue)


def dispatch_run(job_id: uuid.UUID | str, queue: str) -> None:
    """Send a held job's run to its node's queue."""
    send(RUN_TASK, args=[str(job_id)], queue=queue)


def request_schedule() -> None:
    """Ask for a scheduler pass after the current transaction commits (a submit, a release)."""
    transaction.on_commit(_send_schedule)


def _send_schedule() -> None:
    # The broker only nudges: if it is down, the periodic pass still finds the work.
    try:
        send(SCHEDULE_TASK)
    except Exception:
        log.exception("could not queue %s; the periodic pass will catch up", SCHEDULE_TASK)
