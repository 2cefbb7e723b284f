"""The meter: runs from hold to release; at release it writes the one record of the hold."""

import hashlib
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db import transaction

from accounting.fairshare import add_usage
from accounting.models import Ledger, Record

SECONDS = Decimal("0.001")
MONEY = Decimal("0.000001")


@dataclass(frozen=True)
class Usage:
    cpu_seconds: float = 0.0
    memory_peak_mb: int | None = None


@dataclass(frozen=True)
class Held:
    """What one hold held, from hold to release: the plain values a record is written from."""

    hold_id: uuid.UUID
    job_id: uuid.UUID
    team_id: int
    team_slug: str
    node: str
    cpu_set: list[int]
    memory_mb: int
    gpu_ids: list[str]
    held_at: datetime
    released_at: datetime


def cost_of(*, cpus: int, memory_mb: int, gpus: int, held_seconds: Decimal) -> Decimal:
    hours = held_seconds / Decimal(3600)
    per_hour = (
        cpus * settings.E31_RATE_CORE_HOUR
        + Decimal(memory_mb) / Decimal(1024) * settings.E31_RATE_GB_HOUR
        + gpus * settings.E31_RATE_GPU_HOUR
    )
    return (per_hour * hours).quantize(MONEY, rounding=ROUND_HALF_UP)


def record_hash(prev_hash: str, fields: dict) -> str:
    canonical = json.dumps(fields, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()


def _instant(value: datetime) -> str:
    # The database keeps the instant, not the offset it was written with: a release given a local
    # time must hash the same as the record read back, which comes in UTC.
    return value.astimezone(UTC).isoformat()


def _hashed_fields(record: Record, team_slug: str | None = None) -> dict:
    return {
        "sequence": record.sequence,
        "hold": str(record.hold_id),
        "job": str(record.job_id),
        "team": team_slug if team_slug is not None else record.team.slug,
        "node": record.node,
        "cpu_set": record.cpu_set,
        "memory_mb": record.memory_mb,
        "gpu_ids": record.gpu_ids,
        "held_at": _instant(record.held_at),
        "released_at": _instant(record.released_at),
        "held_seconds": str(record.held_seconds),
        "cpu_seconds": str(record.cpu_seconds),
        "cost": str(record.cost),
        "outcome": record.outcome,
    }


@transaction.atomic
def write_record(held: Held, *, outcome: str, usage: Usage) -> Record:
    """Write the one record of a released hold, chained to the previous record by its hash."""
    Ledger.objects.get_or_create(pk=1)
    ledger = Ledger.objects.select_for_update().get(pk=1)
    held_seconds = Decimal((held.released_at - held.held_at).total_seconds()).quantize(SECONDS)
    cpus, gpus = len(held.cpu_set), len(held.gpu_ids)
    record = Record(
        hold_id=held.hold_id,
        job_id=held.job_id,
        team_id=held.team_id,
        node=held.node,
        cpu_set=held.cpu_set,
        cpus=cpus,
        memory_mb=held.memory_mb,
        gpus=gpus,
        gpu_ids=held.gpu_ids,
        held_at=held.held_at,
        released_at=held.released_at,
        held_seconds=held_seconds,
        cpu_seconds=Decimal(usage.cpu_seconds).quantize(SECONDS),
        memory_peak_mb=usage.memory_peak_mb,
        cost=cost_of(cpus=cpus, memory_mb=held.memory_mb, gpus=gpus, held_seconds=held_seconds),
        outcome=outcome,
        sequence=ledger.last_sequence + 1,
        prev_hash=ledger.last_hash,
    )
    record.hash = record_hash(record.prev_hash, _hashed_fields(record, held.team_slug))
    record.save(force_insert=True)
    Ledger.objects.filter(pk=1).update(last_sequence=record.sequence, last_hash=record.hash)
    add_usage(held.team_id, core_seconds=float(held_seconds) * cpus, at=held.released_at)
    return record


def verify_chain(records: Iterable[Record]) -> bool:
    """True when every record's hash matches its fields and the record before it."""
    prev = "0" * 64
    for record in sorted(records, key=lambda r: r.sequence):
        if record.prev_hash != prev or record.hash != record_hash(prev, _hashed_fields(record)):
            return False
        prev = record.hash
    return True


def verify_ledger() -> bool:
    """The whole ledger: every record chains, and the last one is the one the ledger row names, so
    records cut off the end are noticed too (the chain alone cannot see them)."""
    records = list(Record.objects.select_related("team").order_by("sequence"))
    ledger = Ledger.objects.filter(pk=1).first()
    if ledger is None:
        return not records
    last = records[-1] if records else None
    ends_right = (
        (last.sequence, last.hash) == (ledger.last_sequence, ledger.last_hash) if last else ledger.last_sequence == 0
    )
    return ends_right and [r.sequence for r in records] == list(range(1, len(records) + 1)) and verify_chain(records)
