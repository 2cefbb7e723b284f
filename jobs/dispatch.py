"""How work reaches the nodes: each held job's run goes to its node's queue; passes are requested.

Tasks are sent by name: the run task belongs to the machine side (worker.tasks), which calls down
into jobs, never the other way round.

Requests for a scheduler pass are coalesced: at most one nudge waits in the broker at a time. A
marker beside the queue, in the broker's Redis, says one is pending; a request that finds it sends
nothing, since the pending pass has yet to read the queue and will see its job. The pass takes the
marker away before it reads the queue (`schedule_request_taken`), so a job committed after that
sends a nudge of its own. While passes are slower than submissions come, a burst is then about one
pass per pass's length, not one per submission, and a submission pays one Redis command instead of a
Celery message.

The broker only nudges; the periodic pass (every E31_SCHEDULE_EVERY_S, from beat) is the backstop,
and takes the marker too. So a nudge that is lost (its sender died between marker and message, a
worker died holding it, the broker restarted) delays its jobs to that pass at most, as a broker
outage always did; the marker also expires after E31_SCHEDULE_EVERY_S on its own. When the marker cannot
be read at all (no Redis broker, an error) every request sends its nudge, as before coalescing.
"""

import logging
import uuid
from functools import cache
from urllib.parse import urlsplit

import redis
from celery import current_app
from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)

RUN_TASK = "worker.run"
SCHEDULE_TASK = "jobs.schedule"
PENDING_KEY = "e31:schedule-pending"
REDIS_SCHEMES = ("redis", "rediss", "unix")


def send(task: str, *, args: list[str] | None = None, queue: str | None = None) -> None:
    """The one place a message leaves for the broker."""
    current_app.send_task(task, args=args or [], queue=queue)


def dispatch_run(job_id: uuid.UUID | str, queue: str) -> None:
    """Send a held job's run to its node's queue."""
    send(RUN_TASK, args=[str(job_id)], queue=queue)


def request_schedule() -> None:
    """Ask for a scheduler pass after the current transaction commits (a submit, a release)."""
    # robust: whatever happens to the nudge, the transaction that asked has committed and stands.
    transaction.on_commit(nudge_scheduler, robust=True)


def nudge_scheduler() -> None:
    """Send a pass's nudge unless one is pending already (its pass will see what committed before)."""
    try:
        if not claim_pending():
            return
    except Exception:  # the marker cannot be read: nudge all the same
        log.warning("could not read %s; nudging anyway", PENDING_KEY, exc_info=True)
    try:
        send(SCHEDULE_TASK)
    except Exception:
        schedule_request_taken()  # nothing is pending after all: the next request sends again
        log.exception("could not queue %s; the periodic pass will catch up", SCHEDULE_TASK)


def claim_pending() -> bool:
    """Mark a nudge as pending; False when one already is. True without a marker on a broker other
    than Redis (every request nudges)."""
    client = _broker()
    if client is None:
        return True
    return bool(client.set(PENDING_KEY, "1", nx=True, ex=pending_ttl_s()))


def schedule_request_taken() -> None:
    """A pass is starting (or a nudge failed to leave): later requests must send a nudge again."""
    try:
        if (client := _broker()) is not None:
            client.delete(PENDING_KEY)
    except Exception:
        log.warning("could not clear %s; it expires within %d s", PENDING_KEY, pending_ttl_s(), exc_info=True)


def pending_ttl_s() -> int:
    """How long a marker stands without its pass: no longer than the periodic pass takes to come."""
    every: int = settings.E31_SCHEDULE_EVERY_S
    return every


def _broker() -> redis.Redis | None:
    return _client(settings.CELERY_BROKER_URL)


@cache
def _client(url: str) -> redis.Redis | None:
    # One client (and connection pool) per process and URL; redis-py's pool reconnects after a fork.
    if urlsplit(url).scheme not in REDIS_SCHEMES:
        return None
    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
