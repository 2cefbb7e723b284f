"""Durations as people type a time limit: the one reader of the form, the API and the command line."""

import pytest

from core.when import DurationTooLong, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90), ("90s", 90), ("90m", 5400), ("2h", 7200), ("1h30m", 5400), ("1d", 86400),
        ("2 h 5 m", 7500), ("10min", 600), ("1D", 86400), (600, 600),
    ],
)  # fmt: skip
def test_a_duration_is_read_with_its_units(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "2x", "h", "-5", "1.5h", "1w", "5m2h", True])
def test_what_is_not_a_duration_is_none(text):
    assert parse_duration(text) is None


def test_a_number_longer_than_any_time_limit_is_not_read():
    with pytest.raises(DurationTooLong):
        parse_duration("9" * 5000 + "s")
