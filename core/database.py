"""Telling a database that is away (down, restarting, refusing connections) from a query that failed."""

from django.db import InterfaceError, OperationalError

# PostgreSQL's SQLSTATEs of a server that is shutting down, crashed or still starting (class 57P), besides
# class 08, "connection exception".
SERVER_AWAY = {"57P01", "57P02", "57P03"}


def unavailable(exc: BaseException) -> bool:
    """Whether `exc` says the database cannot be reached, not that a query was wrong (a deadlock or a lock
    timeout is an OperationalError too, and stays a real error)."""
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__
    if not hasattr(cause, "sqlstate"):  # not psycopg's (SQLite's "database is locked"): not ours to call an outage
        return False
    state: str | None = getattr(cause, "sqlstate")  # noqa: B009 (typed here; checked above)
    return state is None or state.startswith("08") or state in SERVER_AWAY
