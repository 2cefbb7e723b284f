"""How work reaches its plane: a run to its node's queue; a platform pass (routed by its kind to a platform queue,
e31site/settings.py) asked for once a transaction commits, at most one waiting in the broker per task."""

import logging
import uuid
from datetime import datetime
from functools import cache, partial
from typing import Any
from urllib.parse import urlsplit

import redis
from celery import current_app
from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)

RUN_TASK = "worker.run"
SCHEDULE_TASK = "jobs.schedule"
PENDING_PREFIX = "e31:pending:"  # and the task's name: the marker of its pending pass
REDIS_SCHEMES = ("redis", "rediss", "unix")


def send(task: str, *, args: list[str] | None = None, queue: str | None = None, eta: datetime | None = None) -> None:
    # By name: the run task is the machine side's (worker.tasks), which jobs may not import.
    current_app.send_task(task, args=args or [], queue=queue, eta=eta)


def dispatch_run(job_id: uuid.UUID | str, queue: str) -> None:
    send(RUN_TASK, args=[str(job_id)], queue=queue)


def send_after_commit(task: str, *, eta: datetime | None = None) -> None:
    """Ask for a pass of `task` (which beat also runs: a broker down loses nothing) once the transaction commits;
    without `eta`, coalesced (`nudge`)."""
    if eta is None:
        transaction.on_commit(partial(nudge, task), robust=True)
    else:
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
    send_after_commit(SCHEDULE_TASK)


def nudge(task: str) -> None:
    """Send a pass of `task` unless one is pending, whose pass has yet to start; beat's pass backs up a lost one."""
    try:
        if not claim_pending(task):
            return
    except Exception:  # the marker cannot be read: nudge all the same
        log.warning("could not read %s; nudging anyway", pending_key(task), exc_info=True)
    try:
        send(task)
    except Exception:
        pass_taken(task)  # nothing is pending after all: the next request sends again
        log.exception("could not queue %s; the periodic pass will catch up", task)


def nudge_scheduler() -> None:
    nudge(SCHEDULE_TASK)


def claim_pending(task: str) -> bool:
    """Mark a pass of `task` as pending; False when one already is. True, with no marker, on a broker other than
    Redis and for a task beat does not run: nothing would send the pass a lost message held back."""
    ttl = pending_ttl_s(task)
    client = _client(settings.CELERY_BROKER_URL)
    if client is None or ttl is None:
        return True
    return bool(client.set(pending_key(task), "1", nx=True, ex=ttl))


def pass_taken(task: str) -> None:
    """A pass of `task` is starting, before it reads its work (or its nudge failed): later work asks again."""
    try:
        if (client := _client(settings.CELERY_BROKER_URL)) is not None:
            client.delete(pending_key(task))
    except Exception:
        log.warning("could not clear %s; it expires within %s s", pending_key(task), pending_ttl_s(task), exc_info=True)


def schedule_request_taken() -> None:
    pass_taken(SCHEDULE_TASK)


def pending_key(task: str) -> str:
    return PENDING_PREFIX + task


def pending_ttl_s(task: str) -> int | None:
    """How long a marker lasts: no longer than beat's periodic pass of `task` takes to come; None when beat has none."""
    beat: dict[str, dict[str, Any]] = settings.CELERY_BEAT_SCHEDULE
    periods = [float(entry["schedule"]) for entry in beat.values() if entry["task"] == task]
    return max(1, int(min(periods))) if periods else None


@cache
def _client(url: str) -> redis.Redis | None:
    # One connection pool per process and URL: redis-py's pool reconnects after a fork.
    if urlsplit(url).scheme not in REDIS_SCHEMES:
        return None
    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
