"""Durations and moments as people type them: the one reader of the form, the API and the schedules (the
command line sends them as typed)."""

from datetime import UTC, datetime

import pytest

from core.when import (
    BAD_DURATION,
    EARLIEST,
    BadDuration,
    DurationTooLong,
    job_duration,
    parse_duration,
    parse_moment,
    read_duration,
)  # fmt: skip


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


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30:00", 1800), ("90:00", 5400), ("0:59", 59), ("1:30:00", 5400), ("25:00:00", 90000), (" 1:30:00 ", 5400),
        ("2-12", 216000), ("2-12:30", 217800), ("2-12:30:15", 217815), ("0-00:00:01", 1),
    ],
)  # fmt: skip
def test_a_time_as_slurm_writes_it_is_read(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["1:75", "1:60:00", "1:00:60", "1-24", "1-0:60", "5-", "1:2:3:4", "1-2-3", ":30", "1:"]
)
def test_a_slurm_time_with_a_field_past_its_unit_is_none(text):
    assert parse_duration(text) is None


def test_a_moment_back_from_now_is_never_a_slurm_time():
    # "10:30" is a time of day and "2026-12" a month to a reader: neither is read as a span back from now.
    assert parse_moment("10:30") is None and parse_moment("2026-12") is None
    noon = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
    assert parse_moment("1h30m", now=noon) == datetime(2026, 12, 7, 10, 30, tzinfo=UTC)


def test_a_number_longer_than_any_time_limit_is_not_read():
    with pytest.raises(DurationTooLong):
        parse_duration("9" * 5000 + "s")


@pytest.mark.parametrize(
    ("value", "said", "code"),
    [
        ("soon", BAD_DURATION, "invalid"),
        ("2h", "Ensure this value is less than or equal to 3600.", "max_value"),
        ("9" * 5000 + "s", "Ensure this value is less than or equal to 3600.", "max_value"),
        ("0", "Ensure this value is greater than or equal to 1.", "min_value"),
    ],
)
def test_a_duration_out_of_its_bounds_is_refused_in_the_fields_words(value, said, code):
    with pytest.raises(BadDuration) as refused:
        read_duration(value, least=1, most=3600)

    assert (refused.value.message, refused.value.code) == (said, code)


def test_a_jobs_durations_are_bounded_by_their_settings(settings):
    settings.E31_TIME_LIMIT_MAX_S = 7200
    settings.E31_RETRY_DELAY_MAX_S = 60

    assert job_duration("time_limit_s", "2h") == 7200 and job_duration("retry_delay_s", 0) == 0
    with pytest.raises(BadDuration, match="less than or equal to 7200"):
        job_duration("time_limit_s", "2h1s")
    with pytest.raises(BadDuration, match="less than or equal to 60"):
        job_duration("retry_delay_s", "2m")
    with pytest.raises(BadDuration, match="greater than or equal to 1"):
        job_duration("time_limit_s", 0)


def test_a_setting_past_the_column_is_held_to_the_column(settings):
    settings.E31_TIME_LIMIT_MAX_S = 10**12

    with pytest.raises(BadDuration, match="less than or equal to 2147483647"):
        job_duration("time_limit_s", "2147483648")


NOW = datetime(2030, 1, 2, 3, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        ("24h", datetime(2030, 1, 1, 3, 0, tzinfo=UTC)),
        ("1h30m", datetime(2030, 1, 2, 1, 30, tzinfo=UTC)),
        ("2030-01-01T02:00:00+02:00", datetime(2030, 1, 1, 0, 0, tzinfo=UTC)),
        ("9" * 30 + "d", EARLIEST),  # further back than the calendar
        ("999999999d", EARLIEST),
    ],
)
def test_a_moment_is_a_date_or_a_duration_back_from_now(text, moment):
    assert parse_moment(text, now=NOW) == moment


@pytest.mark.parametrize("text", ["last tuesday", "1w", "-5m", "2030-02-30"])
def test_what_is_neither_is_none(text):
    assert parse_moment(text, now=NOW) is None
