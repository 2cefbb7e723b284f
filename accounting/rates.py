"""The rate card: what held compute costs, when, and what a job will cost at worst."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from typing import TypeVar

from django.conf import settings
from django.db.models import DecimalField, ExpressionWrapper, F
from django.db.models.expressions import CombinedExpression

from accounting.models import RateCard
from core import formats

MONEY = Decimal("0.000001")  # a cost is kept exact to this (the column's places)
CENTS = Decimal("0.01")  # and shown rounded, half up, to this
ROUNDING_RULE = (
    "Each cost is kept exact to 0.000001 and shown rounded half up to 0.01; a total is the exact sum of "
    "the exact costs, rounded once."
)
HOUR_S = 3600  # rates are per hour held; holds are kept in seconds

Number = TypeVar("Number", Decimal, float)


def core_hours(core_seconds: Number) -> Number:
    """The one conversion, for budgets, estimates, usage and every page."""
    return core_seconds / HOUR_S


def record_core_seconds() -> CombinedExpression:
    return F("held_seconds") * F("cpus")


def record_core_hours() -> ExpressionWrapper:
    return ExpressionWrapper(
        record_core_seconds() / Decimal(HOUR_S), output_field=DecimalField(max_digits=20, decimal_places=6)
    )


@dataclass(frozen=True)
class Rate:
    """Prices per held hour; `id` 0 is the settings' rate."""

    id: int
    core_hour: Decimal
    gb_hour: Decimal
    gpu_hour: Decimal
    currency: str
    effective_from: datetime | None = None
    runtime_image: str = ""

    def cost(self, *, cpus: int, memory_mb: int, gpus: int, held_seconds: Decimal) -> Decimal:
        hours = held_seconds / HOUR_S
        per_hour = cpus * self.core_hour + Decimal(memory_mb) / Decimal(1024) * self.gb_hour + gpus * self.gpu_hour
        return (per_hour * hours).quantize(MONEY, rounding=ROUND_HALF_UP)


def overhead_s() -> int:
    """The seconds a hold may be metered beyond its job's time limit, so that sum is every job's worst case."""
    return int(settings.E31_HOLD_OVERHEAD_S)


def metered_bound_s(time_limit_s: int) -> int:
    return time_limit_s + overhead_s()


def meter_stop_bound(held_at: datetime, time_limit_s: int) -> datetime:
    return held_at + timedelta(seconds=metered_bound_s(time_limit_s))


def currency() -> str:
    return str(settings.E31_CURRENCY)


def shown(amount: Decimal) -> str:
    return format(amount.quantize(CENTS, rounding=ROUND_HALF_UP), "f")


def settings_rate() -> Rate:
    return Rate(
        0, settings.E31_RATE_CORE_HOUR, settings.E31_RATE_GB_HOUR, settings.E31_RATE_GPU_HOUR, currency=currency()
    )


def _rate(row: RateCard) -> Rate:
    return Rate(row.pk, row.core_hour, row.gb_hour, row.gpu_hour, currency(), row.effective_from, row.runtime_image)


def rate_in_force(at: datetime, *, image: str = "") -> Rate:
    """One for `image` preferred; the settings' rate (id 0) when none is."""
    images = ["", image] if image else [""]
    rows = RateCard.objects.filter(effective_from__lte=at, runtime_image__in=images).order_by()  # sorted by RateBook
    return RateBook(rows).rate_in_force(at, image=image)


class RateBook:
    """Every rate card row, read once: rate_in_force for many jobs (a list page) without a query each."""

    def __init__(self, rows: Iterable[RateCard]) -> None:
        self.rows = sorted(rows, key=lambda r: (r.effective_from, r.pk), reverse=True)  # the latest row first
        self._estimates: dict[tuple[int, int, int, int, int], Estimate] = {}

    @classmethod
    def load(cls) -> "RateBook":
        return cls(RateCard.objects.all())

    def rate_in_force(self, at: datetime, *, image: str = "") -> Rate:
        candidates = [r for r in self.rows if r.effective_from <= at]
        row = next((r for r in candidates if image and r.runtime_image == image), None)
        row = row or next((r for r in candidates if not r.runtime_image), None)
        return _rate(row) if row else settings_rate()

    def estimate(
        self, at: datetime, *, image: str, cpus: int, memory_mb: int, gpus: int, time_limit_s: int
    ) -> "Estimate":
        """Memoised: a page of nightly jobs asks the same few again."""
        rate = self.rate_in_force(at, image=image)
        key = (rate.id, cpus, memory_mb, gpus, time_limit_s)
        if (known := self._estimates.get(key)) is None:
            known = self._estimates[key] = estimate(
                cpus=cpus, memory_mb=memory_mb, gpus=gpus, time_limit_s=time_limit_s, rate=rate
            )
        return known


@dataclass(frozen=True)
class Estimate:
    """The worst case of a job: its whole request held for as long as the meter may count."""

    cost: Decimal
    rate: Rate
    core_hours: Decimal
    held_seconds: int

    @property
    def currency(self) -> str:
        return self.rate.currency

    @property
    def overhead_s(self) -> int:
        return overhead_s()

    @property
    def cost_text(self) -> str:
        return formats.money(self.cost, self.currency)

    def as_dict(self) -> dict[str, str | int]:
        return {
            "words": self.cost_text,
            "amount": shown(self.cost),
            "exact": format(self.cost, "f"),
            "currency": self.currency,
            "core_hours": format(self.core_hours, "f"),
            "held_seconds": self.held_seconds,
            "overhead_s": self.overhead_s,
            "rate_id": self.rate.id,
        }


def estimate(*, cpus: int, memory_mb: int, gpus: int, time_limit_s: int, rate: Rate) -> Estimate:
    """Rounded as its record would be; core-hours up, so no record passes them."""
    bound = metered_bound_s(time_limit_s)
    seconds = Decimal(bound)
    cost = rate.cost(cpus=cpus, memory_mb=memory_mb, gpus=gpus, held_seconds=seconds)
    held = core_hours(Decimal(cpus) * seconds).quantize(MONEY, rounding=ROUND_CEILING)
    return Estimate(cost, rate, core_hours=held, held_seconds=bound)
