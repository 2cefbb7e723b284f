"""The node's database work outside a request or a task: recovering from a dropped connection.

Django closes an unusable connection only around requests and Celery tasks (`close_old_connections`
on their signals). The node also reaches the database elsewhere: the heartbeat thread of the
worker's main process, and the loop that watches a run for its whole length inside one task. A
connection dropped under them (PostgreSQL restarted or failed over, an idle timeout, a proxy) would
fail every later query of that thread, so these places go through the helpers here.
"""

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from django.db import InterfaceError, OperationalError, close_old_connections, connection

log = logging.getLogger(__name__)
T = TypeVar("T")

# What a dropped or refused connection raises (psycopg's errors, wrapped by Django).
DROPPED = (OperationalError, InterfaceError)


@contextmanager
def unit_of_work() -> Iterator[None]:
    """Around one unit of work of a thread that is not a request or a task (a heartbeat), as Django
    does around a request: a connection that failed or outlived DATABASE_CONN_MAX_AGE is closed
    before and after, so the work starts on a usable one."""
    close_old_connections()
    try:
        yield
    finally:
        close_old_connections()


def once_more(operation: Callable[[], T]) -> T:
    """Run a database operation; if the connection dropped, reconnect and run it once more.

    Only for an operation that is safe to repeat (a read, or a write that is idempotent or guarded by
    the state it changes), and never inside a transaction: the transaction died with its connection.
    """
    try:
        return operation()
    except DROPPED as exc:
        if connection.in_atomic_block:
            raise
        log.warning("database connection lost (%s); reconnecting", exc)
        connection.close()
        return operation()


def retrying(operation: Callable[[], T], *, what: str, for_s: float, first_wait_s: float = 0.5) -> T:
    """Run a database operation until it gets through, for up to `for_s` seconds of a database that
    is away (restarted, failed over); the last error is raised after that. Same rules as `once_more`."""
    deadline = time.monotonic() + for_s
    wait = first_wait_s
    while True:
        try:
            return once_more(operation)
        except DROPPED as exc:
            if connection.in_atomic_block or time.monotonic() + wait > deadline:
                raise
            log.warning("%s: the database is unreachable (%s); trying again in %.1fs", what, exc, wait)
            connection.close()
            time.sleep(wait)
            wait = min(wait * 2, 10.0)
