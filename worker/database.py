"""Recovering from a dropped database connection where Django does not (it does only around requests
and tasks): the heartbeat thread, and the loop that watches a run for its whole length."""

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
    """Close a connection that failed or aged out before and after, as Django does around a request."""
    close_old_connections()
    try:
        yield
    finally:
        close_old_connections()


def once_more(operation: Callable[[], T]) -> T:
    """If the connection dropped, reconnect and run it once more: only safe to repeat, outside a transaction."""
    try:
        return operation()
    except DROPPED as exc:
        if connection.in_atomic_block:
            raise
        log.warning("database connection lost (%s); reconnecting", exc)
        connection.close()
        return operation()


def retrying(operation: Callable[[], T], *, what: str, for_s: float, first_wait_s: float = 0.5) -> T:
    """`once_more`, until it gets through or `for_s` seconds of a database away have passed."""
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
