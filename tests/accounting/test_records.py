"""RELEASE: one immutable record per hold, metered from hold to release (its chain: test_ledger.py)."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction

from accounting.chain import ledger_key, record_hash
from accounting.meter import Held, Usage, write_record
from accounting.models import ImmutableRecordError, Ledger, Record
from accounting.rates import settings_rate
from jobs.lifecycle.actions import cancel, release_lost, schedule_pass
from jobs.lifecycle.history import REAPER
from jobs.models import Outcome
from tests.factories import run_to_release, submit_job

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL's trigger (SQLite's: test_append_only.py)"
)


@pytest.fixture
def record(released, member, team) -> Record:
    return released(member, team)


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
    job = submit_job(member, team, time_limit_s=3600)
    schedule_pass(now=NOW)
    last_heartbeat = NOW + timedelta(minutes=10)

    release_lost(
        job,
        node_name=job.active_hold.node.name,
        last_heartbeat=last_heartbeat,
        now=NOW + timedelta(hours=1),
        actor=REAPER,
    )

    record = Record.objects.get(job=job)
    assert (record.released_at, record.held_seconds) == (last_heartbeat, Decimal("600.000"))
    assert record.outcome == Outcome.NODE_LOST


@pytest.mark.parametrize(
    "end",
    [
        lambda job, at: release_lost(job, node_name=job.active_hold.node.name, last_heartbeat=at, now=at, actor=REAPER),
        lambda job, at: cancel(job, now=at),
        lambda job, at: run_to_release(job, now=at, outcome=Outcome.TIMED_OUT, exit_code=137),
    ],
    ids=["node lost", "cancelled", "released by its node"],
)
def test_the_meter_never_counts_a_hold_past_its_time_limit_and_the_overhead(nodes, member, team, settings, end):
    settings.E31_HOLD_OVERHEAD_S = 45
    job = submit_job(member, team, time_limit_s=600)
    schedule_pass(now=NOW)
    job.refresh_from_db()

    end(job, NOW + timedelta(hours=5))  # the node got to it late, or kept it long

    record = Record.objects.get(job=job)
    assert (record.released_at, record.held_seconds) == (NOW + timedelta(seconds=645), Decimal("645.000"))


def test_a_job_cancelled_before_compute_was_held_has_no_record(nodes, member, team):
    job = submit_job(member, team, cpus=64)  # no node has 64 cores: it waits

    cancel(job, now=NOW)

    assert not Record.objects.filter(job=job).exists()


def test_a_job_cancelled_after_its_hold_is_billed_for_the_hold(nodes, member, team):
    job = submit_job(member, team, time_limit_s=3600)
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


def test_a_preempted_attempt_is_recorded_as_held_at_cost_0_and_verifies_in_the_chain(released, member, team, settings):
    settings.E31_RATE_CORE_HOUR, settings.E31_RATE_GB_HOUR = Decimal("0.10"), Decimal("0.02")

    record = released(member, team, cpus=2, memory_mb=2048, held_for=timedelta(minutes=30), outcome=Outcome.PREEMPTED)

    assert (record.outcome, record.held_seconds, record.cpus) == (Outcome.PREEMPTED, Decimal("1800.000"), 2)
    assert record.cost == Decimal("0") and record.rate_core_hour == Decimal("0.10")
    assert record_hash(record, ledger_key()) == record.hash  # the cost the chain covers is the one stored


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

    assert settings_rate().cost(cpus=cpus, memory_mb=memory_mb, gpus=gpus, held_seconds=held_seconds) == cost


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
        hold_id=record.hold_id, job_id=record.job_id, team_id=record.team_id,
        node=record.node, cpu_set=record.cpu_set, memory_mb=record.memory_mb, gpu_ids=record.gpu_ids,
        held_at=record.held_at, released_at=record.released_at,
    )  # fmt: skip


def test_a_hold_has_exactly_one_record(record):
    ledger = Ledger.objects.get()

    with pytest.raises(IntegrityError):
        write_record(held_as_in(record), outcome=Outcome.SUCCEEDED, usage=Usage())

    assert Record.objects.filter(hold=record.hold).count() == 1
    assert Ledger.objects.get().last_sequence == ledger.last_sequence == record.sequence
