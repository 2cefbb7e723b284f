"""A schedule's forecast: the runs left this month times the worst case of what a run submits, beside the budget."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
import time_machine

from accounting.models import Budget, BudgetUnit
from accounting.rates import RateBook
from jobs.models import RuntimeImage
from jobtemplates.models import JobTemplate
from schedules import cron
from schedules.forecast import count_between, forecast, runs_left
from schedules.listing import budgets_of
from tests.factories import RuntimeImageFactory, schedule_of

NOW = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)  # the site's zone is UTC in the tests
JOB = {"name": "nightly", "image": "busybox", "command": ["true"], "cpus": 2, "memory_mb": 1024, "time_limit_s": "1h"}


@pytest.fixture(autouse=True)
def _image(db):
    RuntimeImageFactory(name="busybox")


@pytest.fixture
def rates(settings):
    """1.00 a core-hour, 0.50 a GiB-hour, 6 minutes of hold overhead: at worst a run of JOB (2 cores and 1 GiB
    for its hour and the overhead, 1.1 h) costs 2 × 1.1 × 1.00 + 1 × 1.1 × 0.50 = 2.75 and takes 2.2 core-hours."""
    settings.E31_RATE_CORE_HOUR, settings.E31_RATE_GB_HOUR, settings.E31_RATE_GPU_HOUR = (
        Decimal("1.00"), Decimal("0.50"), Decimal("0"),
    )  # fmt: skip
    settings.E31_HOLD_OVERHEAD_S = 360


def test_runs_left_are_the_planned_times_to_the_end_of_the_month(member, team):
    assert runs_left(schedule_of(member, team, cron="0 1 * * *", time_zone="UTC"), now=NOW) == 3  # 29, 30, 31
    assert runs_left(schedule_of(member, team, cron="0 * * * *", time_zone="UTC"), now=NOW) == 3 * 24 + 11


def test_a_paused_schedule_plans_nothing(member, team):
    assert runs_left(schedule_of(member, team, paused=True), now=NOW) == 0


def test_a_minutely_line_is_counted_whole(member, team):
    start = datetime(2026, 3, 1, 0, 0, 30, tzinfo=UTC)
    count = runs_left(schedule_of(member, team, cron="* * * * *", time_zone="UTC"), now=start)

    assert count == 31 * 24 * 60 - 1  # every minute after 00:00:30 to the month's end


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago"])
@pytest.mark.parametrize(
    "line",
    ["* * * * *", "*/7 * * * *", "30 2 * * *", "*/15 1-3 * * 1-5", "0 2 28-31 * *", "@weekly", "@monthly", "@yearly"],
)
@pytest.mark.parametrize("month", [3, 4, 10, 11])
def test_counting_agrees_with_listing_each_planned_time_across_daylight_saving(zone, line, month):
    start = datetime(2026, month, 1, 7, 13, 30, tzinfo=UTC)
    end = datetime(2026, month + 1, 1, tzinfo=UTC) - timedelta(seconds=1)

    assert count_between(line, ZoneInfo(zone), start, end) == len(
        cron.planned_between(line, ZoneInfo(zone), start, end, most=100_000)
    )


def test_the_cost_is_runs_left_times_a_runs_worst_case_in_money_without_a_budget(member, team, rates):
    schedule = schedule_of(member, team, cron="0 1 * * *", time_zone="UTC", job=JOB)

    found = forecast(schedule, now=NOW, book=RateBook.load(), standing=None, unit=None)

    assert found.total == Decimal("8.25")  # 3 runs left × 2.75
    assert found.as_dict()["runs_left"] == 3 and found.as_dict()["budget"] is None
    assert (found.as_dict()["per_run"], found.as_dict()["words"]) == ("2.750000", "8.25 EUR")


def test_an_array_costs_its_size_per_run(member, team, rates):
    schedule = schedule_of(member, team, cron="0 1 * * *", time_zone="UTC", job=JOB | {"indices": "0-9"})

    found = forecast(schedule, now=NOW, book=RateBook.load(), standing=None, unit=None)

    assert found.total == Decimal("82.50")  # 3 runs × 10 tasks × 2.75


def test_a_template_is_costed_by_its_own_request(member, team, rates):
    template = JobTemplate.objects.create(
        team=team, name="t", image=RuntimeImage.objects.get(), command="true", cpus=4, memory_mb=512, time_limit_s=540
    )
    schedule = schedule_of(member, team, cron="0 1 * * *", time_zone="UTC", template=template)

    found = forecast(schedule, now=NOW, book=RateBook.load(), standing=None, unit=None)

    # 540 s and the overhead's 360 s are 1/4 h: 4 × 1/4 × 1.00 + 0.5 GiB × 1/4 × 0.50 = 1.0625 a run
    assert found.total == Decimal("3.1875")


def test_in_core_hours_beside_a_core_hours_budget(member, team, rates):
    Budget.objects.create(team=team, unit=BudgetUnit.CORE_HOURS, monthly=Decimal(100))
    schedule = schedule_of(member, team, cron="0 1 * * *", time_zone="UTC", job=JOB)

    with time_machine.travel(NOW, tick=False):
        standing, unit = budgets_of([team], now=NOW)[team.pk]
        found = forecast(schedule, now=NOW, book=RateBook.load(), standing=standing, unit=unit)

    assert found.unit == "core_hours"
    assert found.total == Decimal("6.6")  # 3 runs × 2 cores × 1.1 h
    assert found.as_dict()["budget"]["limit"] == "100.00"
