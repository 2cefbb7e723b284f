"""The ledger: records chained by a keyed hash over every column, checked against heads kept apart.

Tampering is done as someone with the database's own rights would: raw SQL with the triggers off
(`session_replication_role = replica`, a superuser's power on PostgreSQL).
"""

import importlib
import os
import stat
import threading
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from io import StringIO
from zoneinfo import ZoneInfo

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import connection, models
from django.test.utils import CaptureQueriesContext

from accounting.chain import HASHED_COLUMNS, ledger_key, record_hash
from accounting.heads import TAIL_BYTES, Head, append_head, last_head
from accounting.meter import Usage
from accounting.models import LedgerVerification, Record
from accounting.tasks import verify_ledger_task
from accounting.verification import Fault, last_verification, verify_and_keep, verify_ledger

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
on_postgresql = pytest.mark.skipif(connection.vendor != "postgresql", reason="tampers as a PostgreSQL superuser")
old_chain = importlib.import_module("accounting.migrations.0005_keyed_hash_chain")


def tamper(sql: str, params: list) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")  # triggers off: a superuser's power
        cursor.execute(sql, params)
        cursor.execute("SET LOCAL session_replication_role = DEFAULT")


def set_columns(record: Record, **values) -> None:
    fields = {f.attname: f for f in Record._meta.concrete_fields}
    assignments = ", ".join(f'"{fields[name].column}" = %s' for name in values)
    prepared = [fields[name].get_db_prep_save(value, connection) for name, value in values.items()]
    tamper(f"UPDATE accounting_record SET {assignments} WHERE id = %s", [*prepared, record.pk])


def rewind_ledger_row(to: Record) -> None:
    tamper("UPDATE accounting_ledger SET last_sequence = %s, last_hash = %s", [to.sequence, to.hash])


def delete_records(*records: Record) -> None:
    tamper("DELETE FROM accounting_record WHERE id = ANY(%s)", [[r.pk for r in records]])


def heads_in(path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()]


# --- the chain ----------------------------------------------------------------------------------


def test_records_form_a_hash_chain(chain):
    records = list(Record.objects.order_by("sequence"))

    assert [r.sequence for r in records] == [1, 2, 3]
    assert records[0].prev_hash == "0" * 64
    assert [r.prev_hash for r in records[1:]] == [r.hash for r in records[:-1]]
    assert verify_ledger()


def test_the_chain_verifies_whatever_time_zone_the_release_was_given_in(released, member, team):
    # A hash must cover the stored instant, not how a datetime happened to be written in memory.
    paris = ZoneInfo("Europe/Paris")
    released(member, team, held_at=datetime(2026, 3, 2, 23, 30, tzinfo=paris), held_for=timedelta(minutes=45))

    assert verify_ledger()


def test_the_hash_covers_every_column_but_itself():
    assert set(HASHED_COLUMNS) == {f.attname for f in Record._meta.concrete_fields} - {"hash"}
    assert {"cpus", "gpus", "memory_peak_mb", "prev_hash", "id", "team_id", "sequence"} <= set(HASHED_COLUMNS)


@on_postgresql
def test_a_forged_record_with_a_recomputed_keyed_hash_breaks_the_link_to_the_next(chain):
    records = list(Record.objects.order_by("sequence"))
    forged = records[1]
    forged.cost = Decimal("0.000000")
    forged.hash = record_hash(forged, ledger_key())
    set_columns(forged, cost=forged.cost, hash=forged.hash)

    check = verify_ledger()

    assert (check.problem.fault, check.problem.sequence, check.problem.record_id) == (
        Fault.CHAIN_BREAK,
        3,
        records[2].pk,
    )


@on_postgresql
def test_a_record_missing_from_the_middle_is_a_gap(chain):
    records = list(Record.objects.order_by("sequence"))
    delete_records(records[1])

    check = verify_ledger()

    assert (check.problem.fault, check.problem.sequence, check.problem.record_id) == (Fault.GAP, 3, records[2].pk)
    assert "sequence 2 missing" in str(check.problem)


def test_renaming_a_team_keeps_its_records_chain(chain, team):
    # The team is hashed by its id: its slug can be edited in the admin.
    team.slug = "crimson"
    team.save(update_fields=["slug"])

    assert verify_ledger()


def test_records_read_back_hash_as_they_were_written(released, member, team):
    # The hash is made from the values in memory at release and checked from the values read back.
    paris = ZoneInfo("Europe/Paris")
    released(member, team, held_at=datetime(2026, 3, 2, 23, 30, 0, 250, tzinfo=paris), held_for=timedelta(seconds=1.5))
    released(member, team, gpus=1, held_for=timedelta(0), usage=Usage(cpu_seconds=1234.5678, memory_peak_mb=2047))

    check = verify_ledger(heads_files=[])

    assert check and check.records == 2


# --- tampering in the database, named ------------------------------------------------------------


def forged_value(field: models.Field, value, *, teams):
    """Another value of the column, of its type (a test made for a new column's type must add one)."""
    if isinstance(field, models.ForeignKey):
        if isinstance(field.target_field, models.UUIDField):
            return uuid.uuid4()
        return next(t.pk for t in teams if t.pk != value)
    if isinstance(field, models.UUIDField):
        return uuid.uuid4()
    if isinstance(field, models.DateTimeField):
        return value + timedelta(seconds=1)
    if isinstance(field, models.DecimalField):
        return value + Decimal(1).scaleb(-field.decimal_places)
    if isinstance(field, models.JSONField):
        return [*value, value[-1]]
    if field.choices:
        return next(choice for choice, _ in field.choices if choice != value)
    if isinstance(field, models.CharField):
        return value[:-1] + ("1" if value[-1] == "0" else "0")
    if isinstance(field, models.IntegerField):
        return value + 1
    pytest.fail(f"no forged value for a {type(field).__name__} yet: add one (the hash covers the column)")


COLUMNS = [f for f in Record._meta.concrete_fields if f.name != "hash"]


@on_postgresql
@pytest.mark.parametrize("field", COLUMNS, ids=lambda f: f.name)
def test_a_change_to_any_column_is_found_and_the_record_named(chain, team, other_team, field):
    last = chain[-1]
    value = forged_value(field, getattr(last, field.attname), teams=[team, other_team])
    assert value != getattr(last, field.attname)

    set_columns(last, **{field.attname: value})

    check = verify_ledger()
    assert not check
    fault = {"sequence": Fault.GAP, "prev_hash": Fault.CHAIN_BREAK}.get(field.name, Fault.HASH_MISMATCH)
    named = (value if field.name == "sequence" else last.sequence, value if field.name == "id" else last.pk)
    assert (check.problem.fault, (check.problem.sequence, check.problem.record_id)) == (fault, named)


def rehash_without_the_key(how: str):
    if how == "the old unkeyed hash":
        slugs = {}

        def old(record: Record) -> str:
            slugs.setdefault(record.team_id, record.team.slug)
            return old_chain.old_hash(record, slugs[record.team_id])

        return old
    return lambda record: record_hash(record, b"a guessed key, not the ledger's")


@on_postgresql
@pytest.mark.parametrize("how", ["the old unkeyed hash", "another key"])
def test_records_rehashed_without_the_key_are_found(chain, how):
    # Change a cost, then chain every later record again and move the ledger row: all anyone could
    # do with the database alone.
    hash_of = rehash_without_the_key(how)
    records = list(Record.objects.order_by("sequence"))
    records[1].cost = Decimal("0.000000")
    prev = records[0].hash
    for record in records[1:]:
        record.prev_hash = prev
        record.hash = prev = hash_of(record)
        set_columns(record, cost=record.cost, prev_hash=record.prev_hash, hash=record.hash)
    rewind_ledger_row(records[-1])

    check = verify_ledger()

    assert (check.problem.fault, check.problem.sequence, check.problem.record_id) == (
        Fault.HASH_MISMATCH,
        2,
        records[1].pk,
    )


@on_postgresql
def test_records_cut_off_the_end_are_named_by_the_ledger_row(chain, settings, tmp_path):
    delete_records(chain[-1])

    check = verify_ledger(heads_files=[])

    assert check.records == 2  # the chain of what is left holds, but the ledger row names a record gone
    assert (check.problem.fault, check.problem.sequence, check.problem.record_id) == (Fault.MISSING_TAIL, 3, None)
    assert "the ledger row names sequence 3" in check.problem.detail


@on_postgresql
def test_records_cut_off_the_end_with_the_ledger_row_rewound_are_named_by_the_heads_file(chain, settings):
    delete_records(*chain[1:])
    rewind_ledger_row(chain[0])
    assert verify_ledger(heads_files=[]), "the database alone shows nothing wrong"

    check = verify_ledger()

    assert (check.problem.fault, check.problem.sequence) == (Fault.MISSING_TAIL, 2)
    assert f"the heads file {settings.E31_LEDGER_HEADS_FILE} names sequence 3" in check.problem.detail
    assert "2 records removed" in check.problem.detail


def test_a_heads_file_naming_another_hash_for_a_record_is_a_head_mismatch(chain, tmp_path):
    elsewhere = tmp_path / "another-machine.log"
    append_head(Head(2, "e" * 64), at=NOW, path=elsewhere)

    check = verify_ledger(heads_files=[elsewhere])

    assert (check.problem.fault, check.problem.sequence, check.problem.record_id) == (
        Fault.HEAD_MISMATCH,
        2,
        chain[1].pk,
    )


# --- the key ------------------------------------------------------------------------------------


def test_the_key_comes_from_e31_ledger_key(settings):
    settings.E31_LEDGER_KEY = "k" * 40

    assert ledger_key() == b"k" * 40


def test_records_hashed_under_one_key_do_not_verify_under_another(chain, settings):
    assert verify_ledger()

    settings.E31_LEDGER_KEY = "another key, for another installation"

    check = verify_ledger()
    assert (check.problem.fault, check.problem.sequence) == (Fault.HASH_MISMATCH, 1)


def test_without_e31_ledger_key_a_random_key_is_kept_beside_the_data_readable_by_its_owner_only(settings, tmp_path):
    settings.E31_LEDGER_KEY, settings.VAR_DIR = None, tmp_path / "var"

    key = ledger_key()

    path = tmp_path / "var" / "ledger_key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == key and len(key) >= 64
    assert ledger_key() == key  # made once, then read
    assert os.listdir(tmp_path / "var") == ["ledger_key"]


def test_a_new_key_is_on_disk_before_it_is_used(settings, tmp_path, monkeypatch):
    settings.E31_LEDGER_KEY, settings.VAR_DIR = None, tmp_path
    synced = []
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), fsync(fd)))

    ledger_key()

    assert [os.path.dirname(path) for path in synced] == [str(tmp_path)]


def test_processes_making_the_key_at_once_agree_on_one(settings, tmp_path):
    settings.E31_LEDGER_KEY, settings.VAR_DIR = None, tmp_path
    start, keys = threading.Barrier(8), []

    def first_use():
        start.wait()
        keys.append(ledger_key())

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    assert len(keys) == 8 and len(set(keys)) == 1
    assert (tmp_path / "ledger_key").read_bytes() == keys[0]
    assert os.listdir(tmp_path) == ["ledger_key"]


def test_the_key_file_is_read_once_a_process(settings, tmp_path):
    settings.E31_LEDGER_KEY, settings.VAR_DIR = None, tmp_path
    key = ledger_key()

    (tmp_path / "ledger_key").write_bytes(b"changed on disk: seen after a restart")

    assert ledger_key() == key


def test_appending_locks_the_ledger_row_in_one_query(chain, released, member, team):
    with CaptureQueriesContext(connection) as queries:
        released(member, team)

    on_ledger = [q["sql"] for q in queries.captured_queries if '"accounting_ledger"' in q["sql"]]
    assert [sql.split()[0] for sql in on_ledger] == ["SELECT", "UPDATE"]
    assert connection.vendor != "postgresql" or on_ledger[0].endswith("FOR UPDATE")


def test_an_empty_key_file_stops_the_meter_instead_of_hashing_with_no_key(settings, tmp_path):
    settings.E31_LEDGER_KEY, settings.VAR_DIR = None, tmp_path
    (tmp_path / "ledger_key").write_bytes(b"")

    with pytest.raises(ImproperlyConfigured, match="ledger key file .* is empty"):
        ledger_key()


# --- the heads file -----------------------------------------------------------------------------


def test_each_committed_record_appends_its_head_to_the_heads_file(chain, settings):
    path = settings.E31_LEDGER_HEADS_FILE

    heads = heads_in(path)

    assert [(int(s), h) for s, h, _ in heads] == [(r.sequence, r.hash) for r in chain]
    assert all(datetime.fromisoformat(at).tzinfo for _, _, at in heads)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert last_head(path).head == Head(3, chain[-1].hash, heads[-1][2])


def test_a_head_is_on_disk_before_the_release_returns(released, member, team, settings, monkeypatch):
    synced = []
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), fsync(fd)))

    released(member, team)

    assert str(settings.E31_LEDGER_HEADS_FILE) in synced


def test_a_head_that_cannot_be_written_is_logged_and_the_release_stands(
    released, member, team, settings, tmp_path, caplog
):
    (tmp_path / "not-a-folder").write_text("")
    settings.E31_LEDGER_HEADS_FILE = tmp_path / "not-a-folder" / "ledger-heads.log"

    record = released(member, team)

    assert Record.objects.filter(pk=record.pk).exists()
    assert f"ledger head sequence 1, hash {record.hash[:12]}… was not written" in caplog.text


def test_the_heads_file_head_is_the_highest_of_its_last_lines(tmp_path):
    # Two releases committing at once may append their heads in either order.
    path = tmp_path / "heads.log"
    for sequence in (1, 3, 2):
        append_head(Head(sequence, f"{sequence:064x}"), at=NOW, path=path)

    assert last_head(path).head == Head(3, f"{3:064x}", NOW.isoformat())


def test_only_the_end_of_a_long_heads_file_is_read(tmp_path):
    path = tmp_path / "heads.log"
    lines = [f"{s} {s:064x} {NOW.isoformat()}\n" for s in range(1, 3001)]
    path.write_text("".join(lines))
    assert path.stat().st_size > 2 * TAIL_BYTES

    witnessed = last_head(path)

    assert (witnessed.head.sequence, witnessed.unreadable) == (3000, 0)  # a line cut by the read is not counted


def test_a_torn_line_is_counted_not_taken(tmp_path):
    path = tmp_path / "heads.log"
    path.write_text(f"1 {1:064x} {NOW.isoformat()}\n2 {2:064x}")

    witnessed = last_head(path)

    assert (witnessed.head.sequence, witnessed.unreadable) == (1, 1)


def test_a_database_ahead_of_the_heads_file_is_a_warning_with_the_count(released, member, team, settings, tmp_path):
    released(member, team)
    settings.E31_LEDGER_HEADS_FILE = tmp_path / "missed-two.log"  # the next heads go elsewhere
    released(member, team)
    released(member, team)

    check = verify_ledger(heads_files=[tmp_path / "ledger-heads.log"])

    assert check and check.records == 3
    assert check.warnings == (
        f"the database is 2 records ahead of the heads file {tmp_path / 'ledger-heads.log'} "
        f"(its head: {check.witnessed[0].head}): written by another machine, or by this one without reaching the "
        "file (a crash between commit and append)",
    )


def test_heads_files_copied_from_other_machines_are_checked_too(chain, settings, tmp_path):
    other = tmp_path / "n2-ledger-heads.log"
    append_head(Head(5, "5" * 64), at=NOW, path=other)

    check = verify_ledger(heads_files=[settings.E31_LEDGER_HEADS_FILE, other])

    assert (check.problem.fault, check.problem.sequence) == (Fault.MISSING_TAIL, 4)
    assert f"the heads file {other} names sequence 5" in check.problem.detail


# --- the command ----------------------------------------------------------------------------------


def test_verify_ledger_command_reports_an_intact_ledger(chain, settings):
    out = StringIO()

    call_command("verify_ledger", stdout=out)

    assert out.getvalue().startswith("ok: 3 records, keyed hash chain intact, head sequence 3")
    assert f"heads file {settings.E31_LEDGER_HEADS_FILE}: sequence 3" in out.getvalue()


@on_postgresql
def test_verify_ledger_command_names_the_first_bad_record_and_exits_1(chain):
    set_columns(chain[1], gpus=4)

    with pytest.raises(CommandError) as raised:
        call_command("verify_ledger", stdout=StringIO())

    assert raised.value.returncode == 1
    assert str(raised.value).startswith(
        f"the accounting ledger does not verify: hash mismatch at record 2 (id {chain[1].pk}): "
    )


def test_verify_ledger_command_warns_on_stderr_and_checks_the_heads_files_given(chain, tmp_path):
    out, err = StringIO(), StringIO()
    behind = tmp_path / "behind.log"
    append_head(Head(1, chain[0].hash), at=NOW, path=behind)

    call_command("verify_ledger", "--heads-file", str(behind), stdout=out, stderr=err)

    assert out.getvalue().startswith("ok: 3 records")
    assert f"warning: the database is 2 records ahead of the heads file {behind}" in err.getvalue()


# --- reading stays quick ------------------------------------------------------------------------


def test_verify_ledger_reads_the_records_without_a_query_per_record(chain, django_assert_max_num_queries):
    with django_assert_max_num_queries(2):  # the ledger row, the records
        assert verify_ledger()


# --- the daily check: from the last verified head on -----------------------------------------------


def test_the_daily_check_reads_only_the_records_after_the_last_verified_head(chain, released, member, team):
    assert verify_and_keep(full=True)
    released(member, team)
    released(member, team)

    assert verify_ledger_task()

    kept = last_verification()
    assert (kept.ok, kept.since_sequence, kept.records, kept.head_sequence) == (True, 3, 2, 5)
    assert kept.head_hash == Record.objects.get(sequence=5).hash


@on_postgresql
def test_a_record_changed_after_the_last_verified_head_is_found_by_the_daily_check(chain, released, member, team):
    assert verify_and_keep(full=True)
    later = released(member, team)

    set_columns(later, gpus=4)

    assert not verify_ledger_task()
    kept = last_verification()
    assert (kept.since_sequence, kept.records) == (3, 0)
    assert kept.problem.startswith(f"hash mismatch at record 4 (id {later.pk})")


@on_postgresql
def test_a_record_changed_before_the_last_verified_head_is_found_by_the_whole_walk_only(chain, released, member, team):
    assert verify_and_keep(full=True)
    released(member, team)
    set_columns(chain[1], gpus=4)

    assert verify_ledger_task(), "the daily check reads no record before the verified head"
    check = verify_and_keep(full=True)

    assert (check.problem.fault, check.problem.sequence, check.problem.record_id) == (
        Fault.HASH_MISMATCH,
        2,
        chain[1].pk,
    )


@on_postgresql
@pytest.mark.parametrize("mac", ["none", "another head's"])
def test_a_verified_head_forged_in_the_database_does_not_move_the_daily_checks_start(
    chain, released, member, team, mac
):
    # Someone who can write the database changes a record since the last check, then claims it verified.
    assert verify_and_keep(full=True)
    later = released(member, team)
    set_columns(later, gpus=4)
    kept = last_verification()
    LedgerVerification.objects.create(
        ran_at=kept.ran_at + timedelta(hours=1), ok=True, records=1, head_sequence=later.sequence,
        head_hash=later.hash, head_mac="" if mac == "none" else kept.head_mac, seconds=0,
    )  # fmt: skip

    check = verify_and_keep(full=False, heads_files=[])

    assert (check.problem.fault, check.problem.sequence) == (Fault.HASH_MISMATCH, later.sequence)
    assert last_verification().since_sequence == 0


@on_postgresql
def test_after_a_fault_the_daily_check_walks_the_whole_chain_again(chain, released, member, team):
    assert verify_and_keep(full=True)
    set_columns(chain[1], gpus=4)
    assert not verify_and_keep(full=True)
    released(member, team)

    assert not verify_ledger_task(), "the fault stays reported until it is dealt with"
    assert last_verification().since_sequence == 0


@on_postgresql
def test_the_last_verified_record_replaced_is_a_head_mismatch_for_the_daily_check(chain):
    assert verify_and_keep(full=True)

    set_columns(chain[-1], hash="e" * 64)

    check = verify_and_keep(full=False, heads_files=[])
    assert (check.problem.fault, check.problem.sequence, check.problem.record_id) == (
        Fault.HEAD_MISMATCH,
        3,
        chain[-1].pk,
    )
    assert "the last verified head names sequence 3" in check.problem.detail


# --- the admin ----------------------------------------------------------------------------------


def test_the_admin_shows_the_database_head_beside_this_machines_heads_file(chain, operator, client, settings):
    client.force_login(operator)

    page = client.get("/admin/accounting/record/").content.decode()

    last = chain[-1]
    assert page.count(last.hash) == 2  # the ledger row's, the heads file's
    assert str(settings.E31_LEDGER_HEADS_FILE) in page
    assert "records were removed" not in page


@on_postgresql
def test_the_admin_warns_when_the_heads_file_is_ahead_of_the_database(chain, operator, client):
    delete_records(chain[-1])
    rewind_ledger_row(chain[-2])
    client.force_login(operator)

    page = client.get("/admin/accounting/record/").content.decode()

    assert "The heads file is 1 records ahead of the database: records were removed." in page
