"""Budget warnings: the first release that takes a team's month past 80 or 100 percent of its budget notes it
once (a BudgetWarning row per team, month and level) and says so with accounting.signals.budget_crossed, which
notify (mail) and webhooks hear. Only records count, not the worst case of unreleased jobs: a warning says what
was spent."""

from datetime import datetime
from decimal import Decimal

from accounting.budgets import limit_of, month_of, spent
from accounting.models import Budget, BudgetWarning
from accounting.signals import budget_crossed

LEVELS = [BudgetWarning.Level.NEAR, BudgetWarning.Level.REACHED]


def note_crossings(team_id: int, *, now: datetime) -> list[BudgetWarning]:
    """The levels the team's spending this month has newly crossed, each written once and announced once.
    Called inside a release's transaction, after its record: a team without a budget costs one query, a team
    whose levels are both noted this month two."""
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
    """`total` is at `level` percent of `limit` or past it; nothing spent crosses nothing (a budget of 0)."""
    return total > 0 and total * 100 >= limit * level
