"""RELEASE: one immutable, hash-chained record per hold, metered from hold to release."""

import copy
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction

from accounting.meter import Held, Usage, cost_of, verify_chain, write_record
from accounting.models import ImmutableRecordError, Ledger, Record
from jobs.actions import cancel, release_lost, schedule_pass
from jobs.models import Outcome
from tests.factories import submit_job

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
on_postgresql = pytest.mark.skipif(connection.vendor != "postgresql", reason="the trigger exists on PostgreSQL only")


@pytest.fixture
def record(released, member, team) -> Record:
    return released(member, team)


@pytest.fixture
def chain(released, member, teammate, outsider, team, other_team) -> list[Record]:
    return [
        released(member, team, held_at=NOW, outcome=Outcome.SUCCEEDED),
        released(teammate, team, held_at=NOW + timedelta(hours=1), outcome=Outcome.FAILED, cpus=2),
        released(outsider, other_team, node="n2", held_at=NOW + timedelta(hours=2), outcome=Outcome.TIMED_OUT),
    ]


# --- what a record says -------------------------------------------------------------------------


def test_a_record_describes_exactly_what_was_held_and_how_the_job_ended(released, member, team):
    record = released(
        member,
        team,
        cpus=2,
        memory_mb=2048,
        gpus=1,
        held_at=NOW,
        held_for=timedelta(hours=1, minutes=2, seconds=3, milliseconds=500),
        outcome=Outcome.OUT_OF_MEMORY,
        usage=Usage(cpu_seconds=1234.5678, memory_peak_mb=2047),
    )

    assert (record.team, record.node, record.cpu_set, record.cpus) == (team, "n1", [0, 1], 2)
    assert (record.memory_mb, record.gpus, record.gpu_ids) == (2048, 1, ["GPU-0"])
    assert (record.held_at, record.released_at) == (NOW, NOW + timedelta(hours=1, minutes=2, seconds=3.5))
    assert (record.held_seconds, record.cpu_seconds) == (Decimal("3723.500"), Decimal("1234.568"))
    assert (record.memory_peak_mb, record.outcome) == (2047, Outcome.OUT_OF_MEMORY)
    assert record.job.held_at == record.held_at and record.job.released_at == record.released_at


@pytest.mark.parametrize(
    ("held_for", "seconds"),
    [
        (timedelta(0), Decimal("0.000")),
        (timedelta(milliseconds=1500), Decimal("1.500")),
        (timedelta(days=2, seconds=5), Decimal("172805.000")),
    ],
)
def test_held_seconds_are_released_at_minus_held_at(released, member, team, held_for, seconds):
    record = released(member, team, held_at=NOW, held_for=held_for)

    assert record.held_seconds == seconds
    assert record.released_at - record.held_at == held_for


def test_the_meter_stops_at_the_last_heartbeat_of_a_lost_node(nodes, member, team):
    job = submit_job(member, team)
    schedule_pass(now=NOW)
    last_heartbeat = NOW + timedelta(minutes=10)

    release_lost(job, node_name=job.active_hold.node.name, last_heartbeat=last_heartbeat, now=NOW + timedelta(hours=1))

    record = Record.objects.get(job=job)
    assert (record.released_at, record.held_seconds) == (last_heartbeat, Decimal("600.000"))
    assert record.outcome == Outcome.NODE_LOST


def test_a_job_cancelled_before_compute_was_held_has_no_record(nodes, member, team):
    job = submit_job(member, team, cpus=64)  # no node has 64 cores: it waits

    cancel(job, now=NOW)

    assert not Record.objects.filter(job=job).exists()


def test_a_job_cancelled_after_its_hold_is_billed_for_the_hold(nodes, member, team):
    job = submit_job(member, team)
    schedule_pass(now=NOW)

    cancel(job, now=NOW + timedelta(minutes=3))

    record = Record.objects.get(job=job)
    assert (record.outcome, record.held_seconds) == (Outcome.CANCELLED, Decimal("180.000"))


# --- cost ---------------------------------------------------------------------------------------


def test_cost_follows_the_rate_card(released, member, team, settings):
    settings.E31_RATE_CORE_HOUR, settings.E31_RATE_GB_HOUR, settings.E31_RATE_GPU_HOUR = (
        Decimal("0.10"),
        Decimal("0.02"),
        Decimal("1.50"),
    )

    record = released(member, team, cpus=2, memory_mb=2048, gpus=1, held_for=timedelta(minutes=30))

    # (2 cores × 0.10 + 2 GB × 0.02 + 1 gpu × 1.50) per hour, for half an hour
    assert record.cost == Decimal("0.870000")


@pytest.mark.parametrize(
    ("cpus", "memory_mb", "gpus", "held_seconds", "cost"),
    [
        (1, 0, 0, Decimal("3600"), Decimal("0.040000")),
        (4, 0, 0, Decimal("900"), Decimal("0.040000")),
        (0, 512, 0, Decimal("7200"), Decimal("0.010000")),
        (0, 0, 2, Decimal("1800"), Decimal("0.900000")),
        (1, 0, 0, Decimal("1.000"), Decimal("0.000011")),  # rounded to a millionth, half up
        (8, 65536, 4, Decimal("0"), Decimal("0.000000")),
    ],
)
def test_cost_of_a_hold(settings, cpus, memory_mb, gpus, held_seconds, cost):
    settings.E31_RATE_CORE_HOUR, settings.E31_RATE_GB_HOUR, settings.E31_RATE_GPU_HOUR = (
        Decimal("0.04"),
        Decimal("0.01"),
        Decimal("0.90"),
    )

    assert cost_of(cpus=cpus, memory_mb=memory_mb, gpus=gpus, held_seconds=held_seconds) == cost


# --- immutability -------------------------------------------------------------------------------


def test_a_record_cannot_be_changed(record):
    record.cost = Decimal("0")

    with pytest.raises(ImmutableRecordError):
        record.save()


def test_a_record_cannot_be_deleted(record):
    with pytest.raises(ImmutableRecordError):
        record.delete()

    assert Record.objects.filter(pk=record.pk).exists()


def test_records_cannot_be_updated_or_deleted_in_bulk(record):
    with pytest.raises(ImmutableRecordError):
        Record.objects.filter(pk=record.pk).update(cost=Decimal("0"))
    with pytest.raises(ImmutableRecordError):
        Record.objects.all().delete()
    with pytest.raises(ImmutableRecordError), transaction.atomic():
        Record.objects.bulk_update([record], ["cost"])

    assert Record.objects.get(pk=record.pk).cost == record.cost


@on_postgresql
@pytest.mark.parametrize(
    "sql",
    ["UPDATE accounting_record SET cost = 0", "DELETE FROM accounting_record"],
    ids=["update", "delete"],
)
def test_the_database_refuses_to_change_a_record_even_in_raw_sql(record, sql):
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql)

    assert Record.objects.get(pk=record.pk).cost == record.cost


@on_postgresql
def test_the_database_refuses_a_change_that_goes_around_the_model(record):
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        Record._base_manager.filter(pk=record.pk).update(outcome=Outcome.SUCCEEDED)


def held_as_in(record: Record) -> Held:
    return Held(
        hold_id=record.hold_id, job_id=record.job_id, team_id=record.team_id, team_slug=record.team.slug,
        node=record.node, cpu_set=record.cpu_set, memory_mb=record.memory_mb, gpu_ids=record.gpu_ids,
        held_at=record.held_at, released_at=record.released_at,
    )  # fmt: skip


def test_a_hold_has_exactly_one_record(record):
    ledger = Ledger.objects.get()

    with pytest.raises(IntegrityError):
        write_record(held_as_in(record), outcome=Outcome.SUCCEEDED, usage=Usage())

    assert Record.objects.filter(hold=record.hold).count() == 1
    assert Ledger.objects.get().last_sequence == ledger.last_sequence == record.sequence


# --- the hash chain -----------------------------------------------------------------------------


def test_records_form_a_hash_chain(chain):
    records = list(Record.objects.order_by("sequence"))

    assert [r.sequence for r in records] == [1, 2, 3]
    assert records[0].prev_hash == "0" * 64
    assert [r.prev_hash for r in records[1:]] == [r.hash for r in records[:-1]]
    assert verify_chain(records)
    assert verify_chain(reversed(records))  # order of reading does not matter, sequence does


def test_the_chain_verifies_whatever_time_zone_the_release_was_given_in(released, member, team):
    # A hash must cover the stored instant, not how a datetime happened to be written in memory.
    paris = ZoneInfo("Europe/Paris")
    released(member, team, held_at=datetime(2026, 3, 2, 23, 30, tzinfo=paris), held_for=timedelta(minutes=45))

    assert verify_chain(Record.objects.all())


@pytest.mark.parametrize(
    ("field", "forged"),
    [
        ("cost", Decimal("0.000001")),
        ("held_seconds", Decimal("1.000")),
        ("cpu_seconds", Decimal("99.000")),
        ("outcome", Outcome.SUCCEEDED),
        ("node", "n2"),
        ("cpu_set", [7]),
        ("memory_mb", 1),
        ("gpu_ids", ["GPU-1"]),
        ("released_at", NOW + timedelta(hours=1, seconds=1)),
        ("prev_hash", "f" * 64),
    ],
)
def test_a_changed_record_breaks_the_chain(chain, field, forged):
    records = [copy.copy(r) for r in Record.objects.order_by("sequence")]
    assert getattr(records[1], field) != forged

    setattr(records[1], field, forged)

    assert not verify_chain(records)


def test_a_record_moved_to_another_team_breaks_the_chain(chain, other_team):
    records = list(Record.objects.order_by("sequence"))

    records[0].team = other_team

    assert not verify_chain(records)


def test_a_forged_record_with_a_recomputed_hash_breaks_the_link_to_the_next(chain):
    from accounting.meter import _hashed_fields, record_hash

    records = list(Record.objects.order_by("sequence"))
    forged = records[1]
    forged.cost = Decimal("0.000000")
    forged.hash = record_hash(forged.prev_hash, _hashed_fields(forged))

    assert not verify_chain(records)


def test_a_record_missing_from_the_middle_breaks_the_chain(chain):
    records = list(Record.objects.order_by("sequence"))

    assert not verify_chain([records[0], records[2]])


def test_the_ledger_notices_records_cut_off_the_end(member, team, local_node):
    from django.utils import timezone

    from accounting.meter import verify_ledger
    from jobs.actions import schedule_pass
    from tests.factories import submit_job

    for _ in range(3):
        job = submit_job(member, team)
        schedule_pass(now=timezone.now())
        cancel(job, now=timezone.now())
    assert verify_ledger()

    last = Record.objects.order_by("-sequence").first()
    with connection.cursor() as cursor:  # what only someone with the database's own rights could do
        cursor.execute("SET LOCAL session_replication_role = replica")  # triggers off: a superuser's power
        cursor.execute("DELETE FROM accounting_record WHERE id = %s", [last.pk])
        cursor.execute("SET LOCAL session_replication_role = DEFAULT")

    assert verify_chain(Record.objects.all())  # the chain of what is left still holds…
    assert not verify_ledger()  # …but the ledger knows a record is missing


def test_verify_ledger_command_reports_an_intact_ledger(member, team, local_node):
    from io import StringIO

    from django.core.management import call_command
    from django.utils import timezone

    from jobs.actions import schedule_pass
    from tests.factories import submit_job

    job = submit_job(member, team)
    schedule_pass(now=timezone.now())
    cancel(job, now=timezone.now())
    out = StringIO()

    call_command("verify_ledger", stdout=out)

    assert out.getvalue().startswith("ok: 1 records")
