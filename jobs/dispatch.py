"""How work reaches the nodes: runs to their node's queue, scheduler passes nudged at most one at a time."""

import logging
import uuid
from datetime import datetime
from functools import cache, partial
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


def send(task: str, *, args: list[str] | None = None, queue: str | None = None, eta: datetime | None = None) -> None:
    # By name: the run task is the machine side's (worker.tasks), which jobs may not import.
    current_app.send_task(task, args=args or [], queue=queue, eta=eta)


def dispatch_run(job_id: uuid.UUID | str, queue: str) -> None:
    send(RUN_TASK, args=[str(job_id)], queue=queue)


def send_after_commit(task: str, *, eta: datetime | None = None) -> None:
    """Send `task` once the transaction commits, for a pass that beat also runs: a broker that is down loses
    nothing (beat's periodic pass catches up), and a pass more is harmless."""
    transaction.on_commit(partial(_send_quietly, task, eta=eta), robust=True)


def _send_quietly(task: str, *, eta: datetime | None = None) -> None:
    try:
        send(task, eta=eta)
    except Exception:
        log.exception("could not queue %s; the periodic pass will catch up", task)


def request_schedule_at(moment: datetime) -> None:
    """Ask for a scheduler pass at `moment` (a retry's delay ends) once the transaction commits."""
    send_after_commit(SCHEDULE_TASK, eta=moment)


def request_schedule() -> None:
    """Ask for a scheduler pass once the transaction commits; a failed nudge never undoes it (robust)."""
    transaction.on_commit(nudge_scheduler, robust=True)


def nudge_scheduler() -> None:
    """Send a nudge unless one is pending, whose pass has yet to read the queue; beat's pass backs up a lost one."""
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
    """Mark a nudge as pending; False when one already is, True on a broker other than Redis."""
    client = _client(settings.CELERY_BROKER_URL)
    if client is None:
        return True
    return bool(client.set(PENDING_KEY, "1", nx=True, ex=pending_ttl_s()))


def schedule_request_taken() -> None:
    """A pass is starting (or a nudge failed): clear the marker before the queue is read, so later jobs nudge again."""
    try:
        if (client := _client(settings.CELERY_BROKER_URL)) is not None:
            client.delete(PENDING_KEY)
    except Exception:
        log.warning("could not clear %s; it expires within %d s", PENDING_KEY, pending_ttl_s(), exc_info=True)


def pending_ttl_s() -> int:
    """No longer than the periodic pass takes to come."""
    return int(settings.E31_SCHEDULE_EVERY_S)


@cache
def _client(url: str) -> redis.Redis | None:
    # One connection pool per process and URL: redis-py's pool reconnects after a fork.
    if urlsplit(url).scheme not in REDIS_SCHEMES:
        return None
    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
