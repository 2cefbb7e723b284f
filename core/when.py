"""Moments and durations as people and scripts type them: the one reader of each on the server (the form, the
API, the schedules and, through the API, the command line, which sends them as typed)."""

import re
from datetime import MAXYEAR, UTC, datetime, timedelta

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from core.bounds import RANGES

# What Python and PostgreSQL both hold, with a year to spare for the windows pages compute around a moment;
# one past them is taken as the edge, as scripts write `until=9999-12-31` for "no end".
EARLIEST = datetime(2, 1, 1, tzinfo=UTC)
LATEST = datetime(9998, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def in_utc(value: datetime) -> datetime:
    """In UTC (PostgreSQL takes offsets to ±15:59 only, ISO 8601 to ±23:59), within the edges."""
    try:
        value = value.astimezone(UTC)
    except OverflowError:  # past year 1 or 9999 once moved to UTC
        return LATEST if value.year == MAXYEAR else EARLIEST
    return min(max(value, EARLIEST), LATEST)


def parse_moment(raw: str, *, now: datetime | None = None) -> datetime | None:
    """An ISO 8601 date or date-time (naive: in the current zone) or a duration back from `now`, in UTC; or None."""
    if (back := ago(raw, now=now)) is not None:
        return back
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


DURATION = re.compile(r"^\s*(?:(\d+)\s*d)?\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m(?:in)?)?\s*(?:(\d+)\s*s?)?\s*$", re.I)
# Slurm's forms of time as sbatch reads them: MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS (its bare MM is the seconds
# above here: a field named time_limit_s says so). Only the first field may run past its unit's next.
SLURM_TIME = re.compile(r"^\s*(?:(\d+)-(\d+)(?::(\d+)(?::(\d+))?)?|(?:(\d+):)?(\d+):(\d+))\s*$")
# A longer number is over any limit whatever it says, and is not read (Python refuses over 4,300 digits).
MAX_DURATION_DIGITS = 18
BAD_DURATION = (
    "Enter seconds, a duration with units such as 90s, 90m, 2h, 1h30m or 1d, or a time as Slurm writes it "
    "such as 30:00, 1:30:00 or 2-12:00:00."
)
# A span back from now (`ago`) in JSON Schema's terms (ECMA-262: no flags, so each unit in either case): units in
# order, the first with its unit, since a bare number is no moment (seconds after another unit may go without).
_UNITS = [r"[0-9]+\s*[dD]", r"[0-9]+\s*[hH]", r"[0-9]+\s*[mM](?:[iI][nN])?", r"[0-9]+\s*[sS]"]
_LATER = [*_UNITS[:3], r"[0-9]+\s*[sS]?"]
_SPANS = (first + "".join(rf"(?:\s*{unit})?" for unit in _LATER[i + 1 :]) for i, first in enumerate(_UNITS))
AGO_SCHEMA = {"pattern": rf"^\s*(?:{'|'.join(_SPANS)})\s*$"}

MOMENT_SCHEMA = {"type": "string", "anyOf": [{"format": "date"}, {"format": "date-time"}, AGO_SCHEMA]}
# Django's and DRF's words for a number out of its field's bounds, so a duration's say the same.
OVER = "Ensure this value is less than or equal to {}."
UNDER = "Ensure this value is greater than or equal to {}."

# The durations a job declares: the least each may be, and the setting that holds its most (docs/api.md).
DURATION_LIMITS = {"time_limit_s": (1, "E31_TIME_LIMIT_MAX_S"), "retry_delay_s": (0, "E31_RETRY_DELAY_MAX_S")}
# Their columns (PositiveIntegerField) keep no more, whatever a setting says.
COLUMN_MOST = RANGES["PositiveIntegerField"][1]


class DurationTooLong(ValueError):
    pass


class BadDuration(ValueError):
    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message, self.code = message, code


def parse_duration(value: object) -> int | None:
    """Seconds from 600, 90s, 90m, 2h, 1h30m, 1d, Slurm's 30:00, 1:30:00 or 2-12, or an integer, or None; no bounds."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value)
    return seconds if (seconds := _with_units(text)) is not None else _slurm_time(text)


def _slurm_time(text: str) -> int | None:
    if not (match := SLURM_TIME.match(text)):
        return None
    numbers = _numbers(match)
    day, hour, minute, second = numbers[:4] if numbers[0] is not None else [None, *numbers[4:]]
    # Only the first field given may run past its next unit: 120:00 is two hours, 1:75 a slip.
    if (second or 0) >= 60 or (hour is not None and (minute or 0) >= 60) or (day is not None and (hour or 0) >= 24):
        return None
    return (((day or 0) * 24 + (hour or 0)) * 60 + (minute or 0)) * 60 + (second or 0)


def _with_units(text: str) -> int | None:
    """Seconds from 600, 90s, 90m, 2h, 1h30m or 1d, or None: a moment back from now is only ever written so."""
    match = DURATION.match(text)
    if not match or not any(match.groups()):
        return None
    days, hours, minutes, secs = (number or 0 for number in _numbers(match))
    return ((days * 24 + hours) * 60 + minutes) * 60 + secs


def _numbers(match: re.Match[str]) -> list[int | None]:
    if any(len(g) > MAX_DURATION_DIGITS for g in match.groups() if g):
        raise DurationTooLong(f"a number of more than {MAX_DURATION_DIGITS} digits")
    return [None if g is None else int(g) for g in match.groups()]


def duration_bounds(name: str) -> tuple[int, int]:
    """Of a job's `time_limit_s` or `retry_delay_s`: its setting, read as each value is, within its column."""
    least, setting = DURATION_LIMITS[name]
    return least, min(getattr(settings, setting), COLUMN_MOST)


def read_duration(value: object, *, least: int, most: int) -> int:
    """Seconds within least..most, else BadDuration: the one reader of the form's, API's and schedules' durations."""
    try:
        seconds = parse_duration(value)
    except DurationTooLong:
        raise BadDuration(OVER.format(most), "max_value") from None
    if seconds is None:
        raise BadDuration(BAD_DURATION, "invalid")
    if seconds > most:
        raise BadDuration(OVER.format(most), "max_value")
    if seconds < least:
        raise BadDuration(UNDER.format(least), "min_value")
    return seconds


def job_duration(name: str, value: object) -> int:
    least, most = duration_bounds(name)
    return read_duration(value, least=least, most=most)


def ago(raw: str, *, now: datetime | None = None) -> datetime | None:
    """The moment a duration (`24h`, `7d`) back from `now`, or None. A bare number is none: a moment's digits (an
    epoch, a year) read as seconds back would be a silent guess."""
    if raw.strip().isdigit():
        return None
    try:
        seconds = _with_units(raw)
    except DurationTooLong:
        return EARLIEST
    if seconds is None:
        return None
    try:
        return in_utc((now or timezone.now()) - timedelta(seconds=seconds))
    except OverflowError:
        return EARLIEST
