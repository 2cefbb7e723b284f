"""A cron line: checked, said, and planned in its zone across daylight-saving changes."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from schedules.cron import BadCron, describe, expression, next_runs, planned_between

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def local(zone: ZoneInfo, *parts: int) -> datetime:
    return datetime(*parts, tzinfo=zone)


@pytest.mark.parametrize(
    ("line", "fields"),
    [("@hourly", "0 * * * *"), ("@daily", "0 0 * * *"), ("@midnight", "0 0 * * *"), ("@nightly", "0 1 * * *"),
     ("@weekly", "0 0 * * 0"), ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *"), ("@annually", "0 0 1 1 *"),
     ("@YEARLY", "0 0 1 1 *"), ("  0  1 * *   * ", "0 1 * * *"), ("*/15 2-4 1,15 * 1-5", "*/15 2-4 1,15 * 1-5")],
)  # fmt: skip
def test_five_fields_and_the_aliases_are_taken(line, fields):
    assert expression(line) == fields


@pytest.mark.parametrize(
    ("line", "said"),
    [("0 1 * *", "five fields"), ("0 0 1 * * *", "five fields"), ("61 * * * *", "not a valid cron line"),
     ("0 0 30 2 *", "no time that exists"), ("@fortnightly", "not one of"), ("", "five fields")],
)  # fmt: skip
def test_a_bad_line_says_what_is_wrong(line, said):
    with pytest.raises(BadCron, match=said):
        expression(line)


@pytest.mark.parametrize(
    "line",
    ["0 0 * jan-mar mon-fri", "0 12 * JUL SUN", "*/10 8-18/2 1,15,31 1-12 0-7", "5/10 * * * *", "0 0 * * sun,sat",
     "0 0 29 feb *"],
)  # fmt: skip
def test_the_standard_fields_with_month_and_day_names_are_taken(line):
    assert expression(line) == line


@pytest.mark.parametrize(
    ("line", "said"),
    [("R * * * *", "'R' in the minute field uses R (a random value), an extension of croniter's"),
     ("H 1 * * *", "'H' in the minute field uses H (a hashed value)"),
     ("0 1 L * *", "'L' in the day-of-month field uses L (the last day)"),
     ("0 1 15W * *", "'15W' in the day-of-month field uses W (the nearest weekday)"),
     ("0 1 * * 5#3", "'5#3' in the day-of-week field uses # (the nth weekday of the month)"),
     ("0 1 * * 5L", "'5L' in the day-of-week field uses L (the last day)"),
     ("0 1 ? * *", "'?' in the day-of-month field uses ? (no specific value)"),
     ("0 0 1 * * 2030", "croniter's sixth field of seconds or years is not taken"),
     ("0 1 * * jul", "'jul' in the day-of-week field is refused"),
     ("5-1 * * * *", "the range 5-1 of the minute field ends before it starts"),
     ("*/0 * * * *", "the step /0 of the minute field"),
     ("0 24 * * *", "24 is outside the hour field's range, 0 to 23")],
)  # fmt: skip
def test_croniters_extensions_and_a_sixth_field_are_refused_naming_what(line, said):
    with pytest.raises(BadCron) as refused:
        expression(line)

    assert said in str(refused.value)


def test_reboot_is_refused_naming_it():
    with pytest.raises(BadCron) as refused:
        expression("@reboot")

    said = str(refused.value)
    assert said.startswith("'@reboot' is refused: it runs when a machine starts")
    assert "@yearly" in said and "@reboot" not in said.removeprefix("'@reboot'")


@pytest.mark.parametrize(
    ("line", "said"),
    [("@yearly", "At 00:00, on day 1 of the month, only in January"),
     ("@annually", "At 00:00, on day 1 of the month, only in January"),
     ("@monthly", "At 00:00, on day 1 of the month"), ("@weekly", "At 00:00, only on Sunday"),
     ("@daily", "At 00:00 every day"), ("@midnight", "At 00:00 every day"), ("@hourly", "Every hour")],
)  # fmt: skip
def test_the_sentence_of_each_alias(line, said):
    assert describe(line) == said


@pytest.mark.parametrize(
    ("line", "runs"),
    [("@yearly", [local(BERLIN, 2027, 1, 1), local(BERLIN, 2028, 1, 1)]),
     ("@annually", [local(BERLIN, 2027, 1, 1), local(BERLIN, 2028, 1, 1)]),
     ("@monthly", [local(BERLIN, 2026, 4, 1), local(BERLIN, 2026, 5, 1)]),
     ("@midnight", [local(BERLIN, 2026, 3, 16), local(BERLIN, 2026, 3, 17)])],
)  # fmt: skip
def test_an_alias_plans_its_times_in_the_schedule_zone(line, runs):
    assert next_runs(line, BERLIN, local(BERLIN, 2026, 3, 15, 12, 0), count=2) == runs


def test_a_line_saved_before_the_checks_is_said_as_not_taken_and_plans_nothing():
    assert describe("R * * * *").startswith("Not taken: 'R * * * *' is not standard cron")
    assert next_runs("R * * * *", BERLIN, utc(2026, 1, 1)) == []


def test_the_sentence_of_a_nightly_line():
    assert describe("0 1 * * *") == "At 01:00 every day"
    assert describe("@nightly") == "At 01:00 every day"
    assert describe("*/15 * * * *") == "Every 15 minutes"


def test_next_runs_are_in_the_schedule_zone():
    runs = next_runs("0 1 * * *", BERLIN, utc(2026, 12, 5, 12))
    assert runs == [local(BERLIN, 2026, 12, day, 1) for day in range(6, 11)]
    assert runs[0].isoformat() == "2026-12-06T01:00:00+01:00"


def test_a_time_in_the_spring_forward_gap_runs_once_at_the_first_instant_after_it():
    # Berlin, 29 March 2026: 02:00 CET becomes 03:00 CEST.
    runs = next_runs("30 2 * * *", BERLIN, utc(2026, 3, 28, 12), 3)
    assert runs[0] == local(BERLIN, 2026, 3, 29, 3, 0)
    assert runs[0].astimezone(UTC) == utc(2026, 3, 29, 1, 0)
    assert runs[1] == local(BERLIN, 2026, 3, 30, 2, 30)
    # Every wall time of the gap folds into that one instant, shared with 03:00 itself.
    gap = planned_between("*/15 2-3 * * *", BERLIN, utc(2026, 3, 28, 23), utc(2026, 3, 29, 3))
    assert [t.astimezone(BERLIN).strftime("%H:%M") for t in gap] == ["03:00", "03:15", "03:30", "03:45"]
    # New York, 8 March 2026: 02:00 EST becomes 03:00 EDT.
    assert next_runs("30 2 * * *", NEW_YORK, utc(2026, 3, 7, 12), 1) == [local(NEW_YORK, 2026, 3, 8, 3, 0)]


def test_a_time_in_the_fall_back_overlap_runs_once_at_its_first_occurrence():
    # Berlin, 25 October 2026: 03:00 CEST becomes 02:00 CET, so 02:30 happens twice.
    runs = planned_between("30 2 * * *", BERLIN, utc(2026, 10, 24, 12), utc(2026, 10, 26, 12))
    assert runs == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]
    # Asked from inside the second pass of the overlap, the run already happened: the next is tomorrow's.
    assert next_runs("30 2 * * *", BERLIN, utc(2026, 10, 25, 1, 15), 1) == [local(BERLIN, 2026, 10, 26, 2, 30)]
    # New York, 1 November 2026: 01:30 happens at 05:30Z (EDT) and 06:30Z (EST); it runs at the first.
    runs = planned_between("30 1 * * *", NEW_YORK, utc(2026, 10, 31, 12), utc(2026, 11, 2, 12))
    assert runs == [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]


def test_an_hourly_line_across_a_fall_back_does_not_repeat_the_hour():
    runs = planned_between("0 * * * *", BERLIN, utc(2026, 10, 24, 23, 30), utc(2026, 10, 25, 4, 0))
    walls = [t.astimezone(BERLIN).strftime("%H:%M %Z") for t in runs]
    assert walls == ["02:00 CEST", "03:00 CET", "04:00 CET", "05:00 CET"]


def test_planned_between_is_bounded():
    assert len(planned_between("* * * * *", BERLIN, utc(2026, 1, 1), utc(2026, 2, 1), most=100)) == 100
