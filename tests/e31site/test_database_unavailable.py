"""A database that is away answers 503 with a clear message (HTML pages and the API's JSON); any other
database error is still a 500."""

import sqlite3

import psycopg
import pytest
from django.contrib import auth
from django.db import InterfaceError, OperationalError

from core.database import unavailable
from e31site.middleware import DATABASE_AWAY
from teams import tokens


def wrapped(cause: Exception) -> OperationalError:
    """As Django's DatabaseErrorWrapper raises psycopg's error: its own class, the driver's as the cause."""
    error = OperationalError(str(cause))
    error.__cause__ = cause
    return error


REFUSED = wrapped(psycopg.OperationalError('connection failed: connection to server at "127.0.0.1" refused'))
SHUTTING_DOWN = wrapped(psycopg.errors.AdminShutdown("terminating connection due to administrator command"))
DEADLOCK = wrapped(psycopg.errors.DeadlockDetected("deadlock detected"))
LOCKED = wrapped(sqlite3.OperationalError("database is locked"))


@pytest.mark.parametrize(
    "error, away",
    [(REFUSED, True), (SHUTTING_DOWN, True), (InterfaceError("connection already closed"), True),
     (DEADLOCK, False), (LOCKED, False), (ValueError("no"), False)],
)  # fmt: skip
def test_only_a_database_that_cannot_be_reached_is_called_unavailable(error, away):
    assert unavailable(error) is away


def failing_with(monkeypatch, error: Exception) -> None:
    """Reading the signed-in user (a page) or a token (the API) raises `error`, as the database would."""

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(auth, "get_user", fail)
    monkeypatch.setattr(tokens, "user_for_key", fail)


def test_a_page_says_the_database_is_unavailable_with_503(client, member, monkeypatch):
    client.force_login(member)
    failing_with(monkeypatch, REFUSED)

    response = client.get("/jobs/")

    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert DATABASE_AWAY in response.content.decode()


def test_the_api_says_the_database_is_unavailable_in_json(client, db, monkeypatch):
    failing_with(monkeypatch, SHUTTING_DOWN)

    response = client.get("/api/v1/jobs/", HTTP_AUTHORIZATION="Token abc")

    assert (response.status_code, response.json()) == (503, {"detail": DATABASE_AWAY})


def test_a_real_database_error_is_still_a_500(client, db, monkeypatch):
    failing_with(monkeypatch, DEADLOCK)
    client.raise_request_exception = False

    response = client.get("/api/v1/jobs/", HTTP_AUTHORIZATION="Token abc")

    assert response.status_code == 500
