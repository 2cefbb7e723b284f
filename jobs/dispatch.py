"""How work reaches the nodes: each held job's run goes to its node's queue; passes are requested.

Tasks are sent by name: the run task belongs to the machine side (worker.tasks), which calls down
into jobs, never the other way round.

Requests for a scheduler pass are coalesced: at most one nudge waits in the broker at a time. A
marker beside the queue, in the broker's Redis, says one is pending; a request that finds it sends
nothing, since the pending pass has yet to read the queue and will see its job. The pass takes the
marker away before it reads the queue (`schedule_request_taken`), so a job committed after that
sends a nudge of its own. A burst of 600 submissions is then a handful of passes, not 600, and each
submission pays one Redis command instead of a Celery message. The marker expires on its own
(PENDING_TTL_S) in case its nudge is never taken (no worker consumes): the periodic pass catches up
meanwhile, as it does when the broker is down.
"""

import logging
import uuid
from functools import cache

import redis
from celery import current_app
from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)

RUN_TASK = "worker.run"
SCHEDULE_TASK = "jobs.schedule"
PENDING_KEY = "e31:schedule-pending"
PENDING_TTL_S = 30


def send(task: str, *, args: list[str] | None = None, queue: str | None = None) -> None:
    """The one place a message leaves for the broker."""
    current_app.send_task(task, args=args or [], queue=queue)


def dispatch_run(job_id: uuid.UUID | str, queue: str) -> None:
    """Send a held job's run to its node's queue."""
    send(RUN_TASK, args=[str(job_id)], queue=queue)


def request_schedule() -> None:
    """Ask for a scheduler pass after the current transaction commits (a submit, a release)."""
    transaction.on_commit(nudge_scheduler)


def nudge_scheduler() -> None:
    """Send a pass's nudge unless one is pending already (its pass will see what committed before)."""
    # The broker only nudges: if it is down, the periodic pass still finds the work.
    try:
        if not claim_pending():
            return
    except redis.RedisError:
        log.exception("could not reach the broker for %s; the periodic pass will catch up", SCHEDULE_TASK)
        return
    try:
        send(SCHEDULE_TASK)
    except Exception:
        schedule_request_taken()  # nothing is pending after all: the next request sends again
        log.exception("could not queue %s; the periodic pass will catch up", SCHEDULE_TASK)


def claim_pending() -> bool:
    """Mark a nudge as pending; False when one already is."""
    return bool(_broker().set(PENDING_KEY, "1", nx=True, ex=PENDING_TTL_S))


def schedule_request_taken() -> None:
    """A pass is starting (or a nudge failed to leave): later requests must send a nudge again."""
    try:
        _broker().delete(PENDING_KEY)
    except redis.RedisError:
        log.warning("could not clear %s; it expires within %d s", PENDING_KEY, PENDING_TTL_S)


def _broker() -> redis.Redis:
    return _client(settings.CELERY_BROKER_URL)


@cache
def _client(url: str) -> redis.Redis:
    # One client (and connection pool) per process and URL; redis-py's pool reconnects after a fork.
    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
