"""Moments and durations as people and scripts type them."""

import re
from datetime import MAXYEAR, UTC, datetime

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

# What Python and PostgreSQL both hold, with a year to spare for the windows pages compute around a moment;
# one past them is taken as the edge, as scripts write `until=9999-12-31` for "no end".
EARLIEST = datetime(2, 1, 1, tzinfo=UTC)
LATEST = datetime(9998, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def in_utc(value: datetime) -> datetime:
    """An aware moment in UTC (PostgreSQL takes offsets to ±15:59 only, ISO 8601 to ±23:59), within the edges."""
    try:
        value = value.astimezone(UTC)
    except OverflowError:  # past year 1 or 9999 once moved to UTC
        return LATEST if value.year == MAXYEAR else EARLIEST
    return min(max(value, EARLIEST), LATEST)


def parse_moment(raw: str) -> datetime | None:
    """An ISO 8601 date or date-time (naive: in the site's time zone) in UTC, or None."""
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
MOMENT_SCHEMA = {"type": "string", "anyOf": [{"format": "date"}, {"format": "date-time"}]}


DURATION = re.compile(r"^\s*(?:(\d+)\s*d)?\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m(?:in)?)?\s*(?:(\d+)\s*s?)?\s*$", re.I)
# A longer number is over any limit whatever it says, and is not read (Python refuses over 4,300 digits).
MAX_DURATION_DIGITS = 18
BAD_DURATION = "Enter seconds, or a duration with units such as 90s, 90m, 2h, 1h30m or 1d."


class DurationTooLong(ValueError):
    pass


def parse_duration(value: object) -> int | None:
    """Seconds from 600, 90s, 90m, 2h, 1h30m, 1d or an integer, or None: the one reader, for form, API and CLI."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = DURATION.match(str(value))
    if not match or not any(match.groups()):
        return None
    if any(len(g) > MAX_DURATION_DIGITS for g in match.groups() if g):
        raise DurationTooLong(f"a number of more than {MAX_DURATION_DIGITS} digits")
    days, hours, minutes, secs = (int(g or 0) for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + secs
