"""The meter: at release, the hold's one record, costed at the rate in force when it began and chained."""

import uuid
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db import transaction

from accounting import chain
from accounting.fairshare import add_usage
from accounting.models import Record, charged
from accounting.rates import Rate, rate_in_force

SECONDS = Decimal("0.001")


@dataclass(frozen=True)
class Usage:
    cpu_seconds: float = 0.0
    memory_peak_mb: int | None = None


@dataclass(frozen=True)
class Held:
    hold_id: uuid.UUID
    job_id: uuid.UUID
    team_id: int
    node: str
    cpu_set: list[int]
    memory_mb: int
    gpu_ids: list[str]
    held_at: datetime
    released_at: datetime
    attempt: int | None = None
    image: str = ""


@transaction.atomic
def write_record(held: Held, *, outcome: str, usage: Usage, exit_code: int | None = None) -> Record:
    held_seconds = Decimal((held.released_at - held.held_at).total_seconds()).quantize(SECONDS)
    cpus, gpus = len(held.cpu_set), len(held.gpu_ids)
    rate: Rate = rate_in_force(held.held_at, image=held.image)  # at RENT, whatever changed since
    # A preempted attempt's record says what it held, at no cost to its team (accounting.models.NOT_CHARGED).
    cost = rate.cost(cpus=cpus, memory_mb=held.memory_mb, gpus=gpus, held_seconds=held_seconds)
    if not charged(outcome):
        cost = Decimal(0)
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
        cost=cost,
        outcome=outcome,
        attempt=held.attempt,
        exit_code=exit_code,
        image=held.image or None,
        rate_id=rate.id,
        rate_core_hour=rate.core_hour,
        rate_gb_hour=rate.gb_hour,
        rate_gpu_hour=rate.gpu_hour,
        currency=rate.currency,
    )
    chain.append(record)
    if charged(outcome):  # a preempted attempt does not push its team back in the queue either
        add_usage(held.team_id, core_seconds=float(held_seconds) * cpus, at=held.released_at)
    return record
