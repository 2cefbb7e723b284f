"""Budget warnings: the release whose record takes a team's month to 80% and to 100% of its budget notes each
level once (one BudgetWarning, one budget_crossed), whatever follows; a new month warns again."""

from datetime import timedelta
from decimal import Decimal

import pytest

from accounting.budget_warnings import crossed, note_crossings
from accounting.models import Budget, BudgetExtension, BudgetUnit, BudgetWarning
from accounting.signals import budget_crossed
from tests.accounting.conftest import NOW

pytestmark = pytest.mark.usefixtures("one_per_core_hour")


@pytest.fixture
def heard():
    """The warnings budget_crossed announced, in order."""
    found: list[BudgetWarning] = []

    def listen(sender, *, warning, **kwargs):
        found.append(warning)

    budget_crossed.connect(listen, sender=BudgetWarning, dispatch_uid="tests.heard")
    yield found
    budget_crossed.disconnect(dispatch_uid="tests.heard", sender=BudgetWarning)


def test_each_level_is_noted_once_by_the_release_that_crosses_it(released, member, team, heard):
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("10.00"))

    released(member, team, cpus=7)  # 7.00: 70%
    assert not heard and not BudgetWarning.objects.exists()
    released(member, team, cpus=1, held_at=NOW + timedelta(hours=1))  # 8.00: 80%
    released(member, team, cpus=1, held_at=NOW + timedelta(hours=2))  # 9.00: nothing new
    assert [(w.level, w.spent, w.limit) for w in heard] == [(80, Decimal("8"), Decimal("10.00"))]
    released(member, team, cpus=1, held_at=NOW + timedelta(hours=3))  # 10.00: 100%

    assert [w.level for w in heard] == [80, 100]
    rows = list(BudgetWarning.objects.order_by("level").values_list("team", "month", "level", "unit", "at"))
    march = NOW.date().replace(day=1)
    assert rows == [
        (team.pk, march, 80, "money", NOW + timedelta(hours=2)),
        (team.pk, march, 100, "money", NOW + timedelta(hours=4)),
    ]


def test_one_release_past_both_levels_notes_both_in_order(released, member, team, heard):
    Budget.objects.create(team=team, unit=BudgetUnit.CORE_HOURS, monthly=Decimal("4"))

    released(member, team, cpus=4, held_for=timedelta(hours=1))  # 4 core-hours: 100%

    assert [w.level for w in heard] == [80, 100]
    assert note_crossings(team.pk, now=NOW + timedelta(hours=5)) == []
    assert len(heard) == 2


def test_an_extension_counts_in_the_limit(released, member, team, operator, heard):
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("5.00"))
    march = NOW.date().replace(day=1)
    BudgetExtension.objects.create(
        team=team, month=march, amount=Decimal("5.00"), reason="r", granted_by=operator, granted_at=NOW
    )

    released(member, team, cpus=5)  # 5.00 of 10.00

    assert heard == []


def test_a_new_month_warns_again(released, member, team, heard):
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("10.00"))
    released(member, team, cpus=8)
    released(member, team, cpus=8, held_at=NOW.replace(month=4))

    assert [(w.month.month, w.level) for w in heard] == [(3, 80), (4, 80)]


def test_other_teams_spending_does_not_count(released, member, outsider, team, other_team, heard):
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("10.00"))
    released(outsider, other_team, cpus=8)

    assert heard == [] and note_crossings(team.pk, now=NOW + timedelta(hours=2)) == []


def test_a_team_without_a_budget_costs_one_query(team, django_assert_num_queries):
    with django_assert_num_queries(1):
        assert note_crossings(team.pk, now=NOW) == []


def test_a_team_warned_at_both_levels_costs_two_queries(team, django_assert_num_queries):
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("10.00"))
    for level in (80, 100):
        BudgetWarning.objects.create(
            team=team, month=NOW.date().replace(day=1), level=level, unit="money", spent=10, limit=10, at=NOW
        )

    with django_assert_num_queries(2):
        assert note_crossings(team.pk, now=NOW) == []


def test_crossed():
    assert crossed(Decimal("8"), Decimal("10"), 80) and not crossed(Decimal("7.99"), Decimal("10"), 80)
    assert crossed(Decimal("0.01"), Decimal("0"), 100) and not crossed(Decimal("0"), Decimal("0"), 80)
