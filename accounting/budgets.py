"""Budgets: a team's monthly ceiling, in money or held core-hours, and the check at submission."""

from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import ROUND_HALF_UP, Decimal
from typing import cast

from django.contrib.auth.models import User
from django.db.models import OneToOneRel, Sum
from django.utils import timezone

from accounting.models import Budget, BudgetExtension, BudgetUnit, Record
from accounting.rates import CENTS, Estimate, currency, record_core_hours
from core import formats
from core.refusals import Refused
from teams.models import Team

WARN_AT = Decimal("0.8")  # the share of a budget at which the team's pages warn
HOURS = Decimal("0.01")


def month_of(at: datetime) -> date:
    return timezone.localtime(at).date().replace(day=1)


def month_bounds(month: date) -> tuple[datetime, datetime]:
    zone = timezone.get_current_timezone()
    start = datetime.combine(month.replace(day=1), time.min, tzinfo=zone)
    after = date(month.year + (month.month == 12), month.month % 12 + 1, 1)
    return start, datetime.combine(after, time.min, tzinfo=zone)


def spent(team_id: int, month: date, unit: str) -> Decimal:
    """The records it pays for: a preempted attempt's held core-hours are not spent."""
    start, end = month_bounds(month)
    records = Record.objects.charged().filter(team_id=team_id, released_at__gte=start, released_at__lt=end)
    if unit == BudgetUnit.MONEY:
        total = records.aggregate(total=Sum("cost"))["total"]
    else:
        total = records.aggregate(total=Sum(record_core_hours()))["total"]
    return total or Decimal(0)


def limit_of(budget: Budget, month: date) -> Decimal:
    extra = BudgetExtension.objects.filter(team_id=budget.team_id, month=month).aggregate(total=Sum("amount"))
    return budget.monthly + (extra["total"] or Decimal(0))


@dataclass(frozen=True)
class Standing:
    team: str
    month: date
    unit: str
    limit: Decimal
    spent: Decimal
    committed: Decimal  # the worst case of its jobs not yet released

    @property
    def used(self) -> Decimal:
        return self.spent + self.committed

    @property
    def share(self) -> Decimal:
        return self.used / self.limit if self.limit else Decimal(1)

    @property
    def percent(self) -> int:
        return int((self.share * 100).to_integral_value(rounding=ROUND_HALF_UP))

    @property
    def warn(self) -> bool:
        return self.share >= WARN_AT

    @property
    def amount_spent(self) -> str:
        return self.amount(self.spent)

    @property
    def amount_committed(self) -> str:
        return self.amount(self.committed)

    @property
    def amount_limit(self) -> str:
        return self.amount(self.limit)

    def amount(self, value: Decimal) -> str:
        return in_unit(value, self.unit)


def worst_case(value: Estimate, unit: str) -> Decimal:
    return value.cost if unit == BudgetUnit.MONEY else value.core_hours


def in_unit(value: Decimal, unit: str, *, currency_code: str = "") -> str:
    if unit == BudgetUnit.MONEY:
        return formats.money(value, currency_code or currency())
    return formats.core_hours(value)


def standing(team: Team, *, committed: Decimal, now: datetime) -> Standing | None:
    budget = Budget.objects.filter(team=team).first()
    if budget is None:
        return None
    month = month_of(now)
    return Standing(
        team.slug, month, budget.unit, limit_of(budget, month), spent(team.pk, month, budget.unit), committed
    )


def budget_unit(team: Team, *, loaded: bool = False) -> str | None:
    """With `loaded`, from its select_related("budget") when it has one."""
    if loaded and _TEAM_BUDGET.is_cached(team):
        budget = cast(Budget | None, _TEAM_BUDGET.get_cached_value(team))
        return budget.unit if budget else None
    return next(iter(Budget.objects.filter(team=team).values_list("unit", flat=True)), None)  # one per team


# The reverse side of Budget.team, which keeps what select_related loaded on the team.
_TEAM_BUDGET = cast(OneToOneRel, Team._meta.get_field("budget"))


class OverBudget(Refused):
    status = 402

    def __init__(self, standing: Standing, estimate: Decimal) -> None:
        self.standing, self.estimate = standing, estimate
        super().__init__(self.explanation())

    @property
    def total(self) -> Decimal:
        return self.standing.used + self.estimate

    def explanation(self) -> str:
        s, a = self.standing, self.standing.amount
        return (
            f"Over budget: team {s.team}'s budget for {s.month:%B %Y} is {a(s.limit)}. It has spent {a(s.spent)}, "
            f"its waiting and running jobs may cost up to {a(s.committed)}, and this job up to {a(self.estimate)}: "
            f"{a(self.total)} in all, {a(self.total - s.limit)} more than the budget. Ask an operator for an "
            "extension, or ask for less (cpus, memory, time limit)."
        )

    def as_dict(self) -> dict[str, str]:
        s = self.standing
        exact = CENTS if s.unit == BudgetUnit.MONEY else HOURS
        return {
            "code": "over_budget",
            "detail": self.explanation(),
            "team": s.team,
            "month": f"{s.month:%Y-%m}",
            "unit": s.unit,
            "currency": currency() if s.unit == BudgetUnit.MONEY else "",
            "budget": str(s.limit),
            "spent": str(s.spent.quantize(exact, rounding=ROUND_HALF_UP)),
            "committed": str(s.committed.quantize(exact, rounding=ROUND_HALF_UP)),
            "estimate": str(self.estimate.quantize(exact, rounding=ROUND_HALF_UP)),
            "total": str(self.total.quantize(exact, rounding=ROUND_HALF_UP)),
        }


def lock_team(team: Team) -> None:
    """So two submissions at once cannot both pass on the same headroom."""
    Team.objects.select_for_update().filter(pk=team.pk).values_list("pk", flat=True).first()


def check(team: Team, *, estimate: Decimal, committed: Decimal, now: datetime) -> Standing | None:
    found = standing(team, committed=committed, now=now)
    if found is not None and found.used + estimate > found.limit:
        raise OverBudget(found, estimate)
    return found


def extend(team: Team, *, amount: Decimal, reason: str, by: User | None, now: datetime) -> BudgetExtension:
    return BudgetExtension.objects.create(
        team=team, month=month_of(now), amount=amount, reason=reason, granted_by=by, granted_at=now
    )
