"""The database keeps the ledger append-only, on PostgreSQL and SQLite alike, and migrating chains old records again.

The suite runs on PostgreSQL; the SQLite path is exercised for real by running the project as a
fresh installation would: `manage.py migrate` on a new SQLite file, releases through the domain,
`manage.py verify_ledger`, in processes of their own.
"""

import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import psycopg
import pytest
from django.db import DatabaseError, connection, transaction

from accounting.models import Ledger, Record

ROOT = Path(__file__).resolve().parents[2]
on_postgresql = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's triggers, in process")

# Three releases through the domain, as the web server or a worker would make them; nothing is sent
# to a broker.
RELEASES = """
import django
django.setup()
from django.utils import timezone
from jobs.scheduling import dispatch
dispatch.send = lambda *args, **kwargs: None
from jobs.lifecycle.actions import cancel, schedule_pass
from pool.nodes import Capacity, register
from tests.factories import TeamFactory, member_of, submit_job
team = TeamFactory(slug="red")
alice = member_of(team, "alice")
register("n1", Capacity(cpu_ids=[0, 1], memory_mb=1024, gpu_ids=[]), now=timezone.now())
for _ in range(3):
    job = submit_job(alice, team)
    schedule_pass(now=timezone.now())
    cancel(job, now=timezone.now())
"""


class Site:
    """An installation of the project in its own folder and database, driven by its own processes."""

    def __init__(self, var_dir: Path, database_url: str = ""):
        self.var_dir, self.database_url = var_dir, database_url

    def env(self) -> dict[str, str]:
        env = {
            "PATH": os.environ["PATH"],
            "DJANGO_SETTINGS_MODULE": "e31site.settings",
            "E31_VAR_DIR": str(self.var_dir),
        }
        if self.database_url:
            env["DATABASE_URL"] = self.database_url  # else unset: SQLite in E31_VAR_DIR
        return env

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, *args], cwd=ROOT, env=self.env(), capture_output=True, text=True, timeout=180
        )  # fmt: skip

    def manage(self, *args: str) -> subprocess.CompletedProcess:
        return self.run("manage.py", *args)

    def ok(self, result: subprocess.CompletedProcess) -> str:
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    def sql(self, statement: str, params: tuple = ()) -> list[tuple]:
        """Run one statement straight on the database, as anyone with write access to it could."""
        if self.database_url:
            with psycopg.connect(self.database_url, autocommit=True) as db:
                cursor = db.execute(statement.replace("?", "%s"), params)
                return cursor.fetchall() if cursor.description else []
        with closing(sqlite3.connect(self.var_dir / "e31.sqlite3")) as db, db:
            return db.execute(statement, params).fetchall()

    def hashes(self) -> list[tuple[int, str, str]]:
        return self.sql("SELECT sequence, prev_hash, hash FROM accounting_record ORDER BY sequence")


@pytest.fixture(scope="module")
def sqlite_template(tmp_path_factory) -> Path:
    """A migrated SQLite installation with three records (made once; each test gets a copy)."""
    site = Site(tmp_path_factory.mktemp("sqlite-site"))
    site.ok(site.manage("migrate", "--no-input"))
    site.ok(site.run("-c", RELEASES))
    return site.var_dir


@pytest.fixture
def sqlite_site(sqlite_template, tmp_path) -> Site:
    shutil.copytree(sqlite_template, tmp_path / "var")
    return Site(tmp_path / "var")


@pytest.fixture
def postgresql_site(tmp_path) -> Site:
    """A database of its own beside the test database, migrated, with three records."""
    settings_dict = connection.settings_dict
    name = f"{settings_dict['NAME']}_site"
    server = f"postgres://{settings_dict['USER']}@{settings_dict['HOST']}:{settings_dict['PORT']}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as db:
        db.execute(f'DROP DATABASE IF EXISTS "{name}"')
        db.execute(f'CREATE DATABASE "{name}"')
    site = Site(tmp_path / "var", f"{server}/{name}")
    try:
        site.ok(site.manage("migrate", "--no-input"))
        site.ok(site.run("-c", RELEASES))
        yield site
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as db:
            db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- SQLite ----------------------------------------------------------------------------------------


def test_on_sqlite_releases_write_a_ledger_that_verifies(sqlite_site):
    out = sqlite_site.ok(sqlite_site.manage("verify_ledger"))

    assert out.startswith("ok: 3 records, keyed hash chain intact, head sequence 3")
    assert [s for s, _, _ in sqlite_site.hashes()] == [1, 2, 3]
    assert len((sqlite_site.var_dir / "ledger-heads.log").read_text().splitlines()) == 3


@pytest.mark.parametrize(
    ("statement", "refusal"),
    [
        ("UPDATE accounting_record SET cost = 0", "accounting records are append-only"),
        ("UPDATE accounting_record SET cpus = cpus + 1 WHERE sequence = 2", "accounting records are append-only"),
        ("DELETE FROM accounting_record WHERE sequence = 3", "accounting records are append-only"),
        ("DELETE FROM accounting_ledger", "the accounting ledger row cannot be deleted"),
        (
            "UPDATE accounting_ledger SET last_sequence = 2, "
            "last_hash = (SELECT hash FROM accounting_record WHERE sequence = 2)",
            "the accounting ledger only moves forward",
        ),
        ("UPDATE accounting_ledger SET last_sequence = 4", "the accounting ledger only moves forward"),
    ],
    ids=["update", "update-one-column", "delete", "delete-ledger-row", "rewind-ledger-row", "ledger-past-records"],
)
def test_on_sqlite_the_database_refuses_to_change_or_remove_records_or_rewind_the_ledger(
    sqlite_site, statement, refusal
):
    before = sqlite_site.sql("SELECT * FROM accounting_record ORDER BY sequence")

    with pytest.raises(sqlite3.IntegrityError, match=refusal):
        sqlite_site.sql(statement)

    assert sqlite_site.sql("SELECT * FROM accounting_record ORDER BY sequence") == before
    assert sqlite_site.sql("SELECT last_sequence FROM accounting_ledger") == [(3,)]


def test_on_sqlite_records_written_before_the_keyed_hash_are_chained_again(sqlite_site):
    sqlite_site.ok(sqlite_site.manage("migrate", "accounting", "0006", "--no-input"))  # the records chained as layout 1
    keyed = sqlite_site.hashes()

    sqlite_site.ok(sqlite_site.manage("migrate", "accounting", "0004", "--no-input"))  # as before the keyed hash
    unkeyed = sqlite_site.hashes()
    sqlite_site.ok(sqlite_site.manage("migrate", "--no-input"))

    assert all(old[2] != new[2] for old, new in zip(unkeyed, keyed, strict=True))
    assert sqlite_site.hashes() == keyed  # the same key and records make the same chain
    assert sqlite_site.sql("SELECT last_hash FROM accounting_ledger") == [(keyed[-1][2],)]
    sqlite_site.ok(sqlite_site.manage("verify_ledger"))
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):  # the triggers are back
        sqlite_site.sql("DELETE FROM accounting_record")


def test_migrating_refuses_to_chain_again_records_changed_before_it(sqlite_site):
    sqlite_site.ok(sqlite_site.manage("migrate", "accounting", "0004", "--no-input"))
    sqlite_site.sql("UPDATE accounting_record SET node = 'n9' WHERE sequence = 2")

    result = sqlite_site.manage("migrate", "--no-input")

    assert result.returncode != 0
    assert "LedgerDoesNotVerify: accounting record 2 (id " in result.stderr
    assert "chaining it again would hide the change" in result.stderr


# --- PostgreSQL ------------------------------------------------------------------------------------


def test_on_postgresql_records_written_before_the_keyed_hash_are_chained_again(postgresql_site):
    site = postgresql_site
    site.ok(site.manage("migrate", "accounting", "0006", "--no-input"))  # the records chained as layout 1
    keyed = site.hashes()

    site.ok(site.manage("migrate", "accounting", "0004", "--no-input"))
    unkeyed = site.hashes()
    site.ok(site.manage("migrate", "--no-input"))

    assert all(old[2] != new[2] for old, new in zip(unkeyed, keyed, strict=True))
    assert site.hashes() == keyed
    site.ok(site.manage("verify_ledger"))
    with pytest.raises(psycopg.errors.RaiseException, match="append-only"):  # the trigger is enabled again
        site.sql("UPDATE accounting_record SET cost = 0")


@on_postgresql
@pytest.mark.parametrize(
    ("sql", "refusal"),
    [
        ("DELETE FROM accounting_ledger", "the accounting ledger row cannot be deleted"),
        (
            "UPDATE accounting_ledger SET last_sequence = 1, "
            "last_hash = (SELECT hash FROM accounting_record WHERE sequence = 1)",
            "the accounting ledger only moves forward",
        ),
        ("UPDATE accounting_ledger SET last_sequence = last_sequence + 1", "the accounting ledger only moves forward"),
        ("UPDATE accounting_ledger SET last_hash = repeat('e', 64)", "the accounting ledger only moves forward"),
    ],
    ids=["delete", "rewind", "past-the-records", "another-hash"],
)
def test_on_postgresql_the_ledger_row_never_goes_backwards(released, member, team, sql, refusal):
    released(member, team)
    released(member, team)

    with pytest.raises(DatabaseError, match=refusal), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql)

    assert Ledger.objects.get().last_sequence == Record.objects.count() == 2
