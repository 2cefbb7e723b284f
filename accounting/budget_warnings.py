"""Budget warnings: noted once per team, month and level (80, 100 percent) by the release that crosses it.
Only records count, not the worst case of unreleased jobs: a warning says what was spent."""

from datetime import datetime
from decimal import Decimal

from accounting.budgets import limit_of, month_of, spent
from accounting.models import Budget, BudgetWarning
from accounting.signals import budget_crossed

LEVELS = [BudgetWarning.Level.NEAR, BudgetWarning.Level.REACHED]


def note_crossings(team_id: int, *, now: datetime) -> list[BudgetWarning]:
    """Inside a release's transaction: a team without a budget costs one query, one with both levels noted two."""
    budget = Budget.objects.filter(team_id=team_id).first()
    if budget is None:
        return []
    month = month_of(now)
    noted = set(BudgetWarning.objects.filter(team_id=team_id, month=month).values_list("level", flat=True))
    if noted.issuperset(LEVELS):
        return []
    limit = limit_of(budget, month)
    total = spent(team_id, month, budget.unit)
    new: list[BudgetWarning] = []
    for level in LEVELS:
        if level in noted or not crossed(total, limit, level):
            continue
        warning, made = BudgetWarning.objects.get_or_create(
            team_id=team_id, month=month, level=level,
            defaults={"unit": budget.unit, "spent": total, "limit": limit, "at": now},
        )  # fmt: skip
        if made:  # a concurrent release that wrote it first announced it
            budget_crossed.send(sender=BudgetWarning, warning=warning)
            new.append(warning)
    return new


def crossed(total: Decimal, limit: Decimal, level: int) -> bool:
    """Nothing spent crosses nothing (a budget of 0)."""
    return total > 0 and total * 100 >= limit * level
