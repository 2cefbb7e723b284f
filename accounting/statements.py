"""Monthly statements, tied to the ledger's sequences and hashes so an auditor can check them with verify_ledger."""

import re
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from django.db.models import Count, Max, Min, Sum

from accounting.budgets import month_bounds
from accounting.chain import START, ledger_row
from accounting.heads import Head
from accounting.models import Record, charged
from accounting.rates import ROUNDING_RULE, currency, shown
from core.when import EARLIEST, LATEST
from teams.models import Team

MONTH = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")
NOT_CHARGED_RULE = "Attempts preempted by a higher queue's job are not charged: their lines say preempted, at cost 0."

LINE_COLUMNS = (
    "sequence", "record", "job", "job_name", "user", "node", "attempt", "held_at", "released_at", "held_seconds",
    "cpus", "memory_mb", "gpus", "outcome", "charged", "rate_core_hour", "rate_gb_hour", "rate_gpu_hour", "cost",
    "cost_shown", "currency",
)  # fmt: skip
_READ = (
    "sequence", "id", "job_id", "job__name", "job__submitted_by__username", "node", "attempt", "held_at", "released_at",
    "held_seconds", "cpus", "memory_mb", "gpus", "outcome", "rate_core_hour", "rate_gb_hour", "rate_gpu_hour", "cost",
    "currency", "hash",
)  # fmt: skip


def parse_month(text: str) -> date | None:
    """None outside core.when's years, where a month has no start or no end."""
    found = MONTH.match(text or "")
    if not found or not EARLIEST.year <= int(found[1]) <= LATEST.year:
        return None
    return date(int(found[1]), int(found[2]), 1)


@dataclass(frozen=True)
class Statement:
    team: Team
    month: date
    lines: list[dict[str, Any]]
    total: Decimal  # exact
    first_sequence: int | None
    last_sequence: int | None
    last_hash: str | None
    ledger_head: Head
    rounding_rule = ROUNDING_RULE
    not_charged_rule = NOT_CHARGED_RULE

    @property
    def currency(self) -> str:
        return currency()

    @property
    def total_cost(self) -> str:
        return shown(self.total)

    @property
    def not_charged(self) -> int:
        return sum(not line["charged"] for line in self.lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "team": self.team.slug,
            "month": f"{self.month:%Y-%m}",
            "currency": self.currency,
            "total_cost": self.total_cost,
            "total_cost_exact": format(self.total, "f"),
            "records": len(self.lines),
            "rounding": self.rounding_rule,
            "not_charged": {"records": self.not_charged, "rule": self.not_charged_rule},
            "ledger": {
                "first_sequence": self.first_sequence,
                "last_sequence": self.last_sequence,
                "last_hash": self.last_hash,
                "head_sequence": self.ledger_head.sequence,
                "head_hash": self.ledger_head.hash,
            },
            "lines": self.lines,
        }


def ledger_head() -> Head:
    return ledger_row() or START


def month_records(month: date) -> Any:
    start, end = month_bounds(month)
    return Record.objects.filter(released_at__gte=start, released_at__lt=end)


def statement(team: Team, month: date) -> Statement:
    head = ledger_head()  # first: records released meanwhile come after it
    rows = month_records(month).filter(team=team, sequence__lte=head.sequence).order_by("sequence").values_list(*_READ)
    lines, total, last_hash = [], Decimal(0), None
    site_currency = currency()
    for row in rows:
        (seq, rid, job, name, user, node, attempt, held_at, released_at, held_s, cpus, mem, gpus, outcome,
         rc, rg, rgpu, cost, cur, last_hash) = row  # fmt: skip
        total += cost
        lines.append({
            "sequence": seq, "record": str(rid), "job": str(job), "job_name": name, "user": user, "node": node,
            "attempt": attempt, "held_at": held_at.isoformat(), "released_at": released_at.isoformat(),
            "held_seconds": format(held_s, "f"), "cpus": cpus, "memory_mb": mem, "gpus": gpus, "outcome": outcome,
            "charged": charged(outcome), "rate_core_hour": _text(rc), "rate_gb_hour": _text(rg),
            "rate_gpu_hour": _text(rgpu), "cost": format(cost, "f"), "cost_shown": shown(cost),
            "currency": cur or site_currency,
        })  # fmt: skip
    return Statement(
        team=team,
        month=month,
        lines=lines,
        total=total,
        first_sequence=lines[0]["sequence"] if lines else None,
        last_sequence=lines[-1]["sequence"] if lines else None,
        last_hash=last_hash,
        ledger_head=head,
    )


def _text(value: Decimal | None) -> str | None:
    return None if value is None else format(value, "f")


def pool_summary(month: date) -> dict[str, Any]:
    head = ledger_head()
    rows = (
        month_records(month)
        .filter(sequence__lte=head.sequence)
        .values("team__slug")
        .annotate(
            records=Count("id"),
            cost=Sum("cost"),
            held_seconds=Sum("held_seconds"),
            first=Min("sequence"),
            last=Max("sequence"),
        )
        .order_by("team__slug")
    )
    teams, total = [], Decimal(0)
    for row in rows:
        total += row["cost"]
        teams.append({
            "team": row["team__slug"], "records": row["records"], "total_cost": shown(row["cost"]),
            "total_cost_exact": format(row["cost"], "f"), "held_seconds": format(row["held_seconds"], "f"),
            "first_sequence": row["first"], "last_sequence": row["last"],
        })  # fmt: skip
    return {
        "month": f"{month:%Y-%m}",
        "currency": currency(),
        "total_cost": shown(total),
        "total_cost_exact": format(total, "f"),
        "rounding": ROUNDING_RULE,
        "ledger": {"head_sequence": head.sequence, "head_hash": head.hash},
        "teams": teams,
    }
