"""A moment as people and scripts type it in a query string (ISO 8601, a date or a date-time), and a
duration as they type a time limit (600, 90s, 90m, 2h, 1h30m, 1d)."""

import re
from datetime import MAXYEAR, UTC, datetime

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

# The moments a query may name: what Python and PostgreSQL both hold, with a year to spare on each side
# for the windows the pages compute around them (30 days back, a day or a week on). One past them is
# taken as the edge: scripts write `until=9999-12-31` for "no end", and ISO 8601 still parses
# 9999-12-31T23:59-23:59, which overflows once moved to UTC (it was a 500).
EARLIEST = datetime(2, 1, 1, tzinfo=UTC)
LATEST = datetime(9998, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def in_utc(value: datetime) -> datetime:
    """An aware moment in UTC, taken into EARLIEST..LATEST. UTC because PostgreSQL takes offsets up to
    ±15:59 only, ISO 8601 up to ±23:59."""
    try:
        value = value.astimezone(UTC)
    except OverflowError:  # past year 1 or 9999 once moved to UTC
        return LATEST if value.year == MAXYEAR else EARLIEST
    return min(max(value, EARLIEST), LATEST)


def parse_moment(raw: str) -> datetime | None:
    """An ISO 8601 date or date-time in UTC (naive ones are in the site's time zone), taken into
    EARLIEST..LATEST; None when it is not one."""
    try:
        # Both parsers raise ValueError for a well-formed impossible date such as 2026-02-30.
        value = parse_datetime(raw)
        if value is None and (day := parse_date(raw)):
            value = datetime(day.year, day.month, day.day)
    except ValueError:
        return None
    if value is None:
        return None
    return in_utc(timezone.make_aware(value) if timezone.is_naive(value) else value)


BAD_MOMENT = "Use an ISO 8601 date or date-time."
# What the OpenAPI document says of a moment parameter (since, until).
MOMENT_SCHEMA = {"type": "string", "anyOf": [{"format": "date"}, {"format": "date-time"}]}


DURATION = re.compile(r"^\s*(?:(\d+)\s*d)?\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m(?:in)?)?\s*(?:(\d+)\s*s?)?\s*$", re.I)
# More digits than any time limit has: such a number is over the limit whatever it says, and is not read
# (Python refuses to read an integer of more than 4,300 digits: a ValueError).
MAX_DURATION_DIGITS = 18
BAD_DURATION = "Enter seconds, or a duration with units such as 90s, 90m, 2h, 1h30m or 1d."


class DurationTooLong(ValueError):
    """A duration with a number of more than MAX_DURATION_DIGITS digits: over any limit."""


def parse_duration(value: object) -> int | None:
    """Seconds from a duration as people write it: 600 (seconds), 90s, 90m, 2h, 1h30m, 1d, or an integer;
    None if unreadable. The one reader of durations: the form, the API and (through the API) the command
    line. Raises DurationTooLong for a number too long to be a time limit."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = DURATION.match(str(value))
    if not match or not any(match.groups()):
        return None
    if any(len(g) > MAX_DURATION_DIGITS for g in match.groups() if g):
        raise DurationTooLong(f"a number of more than {MAX_DURATION_DIGITS} digits")
    days, hours, minutes, secs = (int(g or 0) for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + secs
