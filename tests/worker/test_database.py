"""The node's database work outside requests and tasks survives a dropped connection (a PostgreSQL
restart or failover, an idle timeout, a proxy): the heartbeat, and operations retried once."""

import psycopg
import pytest
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from pool.models import Node
from tests.conftest import wait_until
from worker import database, node


def drop_connection() -> None:
    """Have PostgreSQL end this thread's connection, as a restart or an idle timeout would."""
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    db = connection.settings_dict
    params = {"host": db["HOST"], "port": db["PORT"], "user": db["USER"], "dbname": db["NAME"]}
    with psycopg.connect(**params, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
        gone = "SELECT count(*) FROM pg_stat_activity WHERE pid = %s"
        wait_until(lambda: other.execute(gone, [pid]).fetchone()[0] == 0, 10, message="the backend to end")


@pytest.fixture(autouse=True)
def _usable_connection_afterwards(transactional_db):
    yield
    connection.close()  # the next one is new, for the flush after the test


@pytest.fixture
def after_a_drop(transactional_db, monkeypatch):
    # Connections kept for reuse (DATABASE_CONN_MAX_AGE): one dropped meanwhile is not closed for its age.
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", None)
    drop_connection()


def test_a_plain_query_fails_on_a_dropped_connection(after_a_drop):
    # What the heartbeat thread met before: every later query of the thread failed the same way.
    with pytest.raises(OperationalError):
        Node.objects.count()


def test_once_more_reconnects_and_repeats_the_operation(local_node, after_a_drop):
    assert database.once_more(lambda: Node.objects.filter(name=local_node.name).count()) == 1


def test_once_more_does_not_repeat_inside_a_transaction(transactional_db, local_node):
    with pytest.raises(OperationalError), transaction.atomic():
        drop_connection()
        database.once_more(lambda: Node.objects.count())


def test_retrying_gives_up_with_the_last_error_when_the_database_stays_away(transactional_db):
    def away():
        raise OperationalError("connection refused")

    with pytest.raises(OperationalError, match="connection refused"):
        database.retrying(away, what="a test", for_s=0.3, first_wait_s=0.1)


def test_a_heartbeat_after_the_database_dropped_the_connection_gets_through(local_node, after_a_drop):
    before = local_node.last_heartbeat

    node.beat()

    local_node.refresh_from_db()
    assert local_node.last_heartbeat > before


def test_the_heartbeat_recovers_on_the_beat_after_one_that_failed(transactional_db, local_node, monkeypatch):
    # The connection dropped in the middle of a beat (after its first query): that beat fails, the
    # next one, on a new connection, gets through.
    failing = {"beats": 1}
    real = node.send_heartbeat

    def cut_off() -> None:
        if failing["beats"]:
            failing["beats"] -= 1
            drop_connection()
            connection.cursor().execute("SELECT 1")
        real()

    monkeypatch.setattr(node, "send_heartbeat", cut_off)
    monkeypatch.setattr(database, "once_more", lambda operation: operation())  # no second try in the beat
    with pytest.raises(OperationalError):
        node.beat()
    sent = timezone.now()

    node.beat()

    assert Node.objects.get(pk=local_node.pk).last_heartbeat >= sent
