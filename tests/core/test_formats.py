"""core.formats: each kind of number written one way, for people; None and values that are not finite read
as "—", zero reads as zero, a tiny positive amount never reads as nothing, huge values stay exact."""

import math
from datetime import timedelta
from decimal import Decimal

import pytest

from core.formats import core_hours, count, duration, money, outcome_label, percent
from core.outcomes import Outcome


@pytest.mark.parametrize(
    "amount, shown",
    [
        (Decimal("0.52"), "0.52 EUR"),
        (Decimal("0.515"), "0.52 EUR"),  # half up, as the records are rounded
        (Decimal("0"), "0.00 EUR"),
        (0, "0.00 EUR"),
        (Decimal("0.000001"), "less than 0.01 EUR"),
        (Decimal("0.004999"), "less than 0.01 EUR"),
        (Decimal("0.005"), "0.01 EUR"),
        (Decimal("-0.52"), "-0.52 EUR"),
        (Decimal("-0.001"), "0.00 EUR"),  # never "-0.00"
        (Decimal("1234567.891"), "1,234,567.89 EUR"),
        (Decimal("1e20"), "100,000,000,000,000,000,000.00 EUR"),
        (0.1, "0.10 EUR"),
        (None, "—"),
        (math.nan, "—"),
        (math.inf, "—"),
    ],
)
def test_money_is_to_the_cent_with_its_currency(amount, shown):
    assert money(amount, "EUR") == shown


@pytest.mark.parametrize(
    "value, shown",
    [
        (Decimal("165.857000000000"), "2 m 46 s"),  # a statement's held seconds, rounded to the second
        (45, "45 s"),
        (0, "0 s"),
        (0.2, "< 1 s"),
        (Decimal("0.999"), "< 1 s"),
        (59.5, "1 m 00 s"),
        (3900, "1 h 05 m"),
        (86399, "23 h 59 m"),
        (86400, "1 d 0 h"),
        (3 * 86400 + 4 * 3600 + 59, "3 d 4 h"),
        (10**12, "11,574,074 d 1 h"),
        (-5, "0 s"),  # clocks apart: never a negative span
        (timedelta(minutes=2, seconds=46), "2 m 46 s"),
        (timedelta(milliseconds=1), "< 1 s"),
        (None, "—"),
        (math.nan, "—"),
    ],
)
def test_duration_reads_in_the_two_largest_units(value, shown):
    assert duration(value) == shown


@pytest.mark.parametrize(
    "value, shown",
    [
        (Decimal("0.166667"), "0.17 core-hours"),
        (Decimal("0"), "0.00 core-hours"),
        (Decimal("0.001"), "< 0.01 core-hours"),
        (Decimal("12345.678"), "12,345.68 core-hours"),
        (2, "2.00 core-hours"),
        (None, "—"),
    ],
)
def test_core_hours_have_two_places(value, shown):
    assert core_hours(value) == shown


@pytest.mark.parametrize(
    "ratio, shown",
    [
        (0.3447, "34.5 %"),
        ("0.3447", "34.5 %"),  # the utilisation API's text
        (Decimal("0.34"), "34 %"),
        (1, "100 %"),
        (0, "0 %"),
        (0.0001, "< 0.1 %"),
        (0.0005, "0.1 %"),
        (12.5, "1,250 %"),
        (-0.25, "-25 %"),
        (None, "—"),
        (math.inf, "—"),
    ],
)
def test_percent_has_one_place_at_most(ratio, shown):
    assert percent(ratio) == shown


def test_count_is_singular_for_one_only():
    assert [count(n, "core") for n in (0, 1, 2)] == ["0 cores", "1 core", "2 cores"]
    assert count(1, "gpu") == "1 gpu" and count(3, "gpu") == "3 gpus"
    assert count(2, "child", "children") == "2 children" and count(1_000_000, "job") == "1,000,000 jobs"
    assert count(None, "core") == "—"


def test_every_outcome_has_a_label_and_none_shows_its_raw_value():
    assert outcome_label("out_of_memory") == "out of memory"
    assert outcome_label(Outcome.TIMED_OUT) == "timed out"
    assert all("_" not in outcome_label(value) for value in Outcome.values)
    assert outcome_label("") == "" and outcome_label(None) == ""
    assert outcome_label("some_new_way") == "some new way"
