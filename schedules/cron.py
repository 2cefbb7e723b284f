"""A schedule's cron line: checked, said as a sentence, and turned into planned instants in its time zone.

croniter walks the line in the zone's wall-clock time (naive datetimes), and this module alone maps a wall
time to an instant, so daylight-saving changes are decided in one place: a wall time in the spring-forward
gap runs at the first instant after the gap (several gap times fold into that one run), and a wall time the
fall-back repeats runs once, at its first occurrence. croniter's own time-zone handling is not used.
"""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from cron_descriptor import ExpressionDescriptor, Options
from croniter import CroniterBadDateError, croniter

ALIASES = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@nightly": "0 1 * * *", "@weekly": "0 0 * * 0"}
# croniter gives up on a line that matches nothing for this long (e.g. 30 February).
NEVER_YEARS = 8


class BadCron(ValueError):
    pass


@lru_cache(maxsize=1024)  # a pure function of the text, walked by every pass and page: checked once
def expression(line: str) -> str:
    """The five fields a line stands for (an alias expanded); else BadCron saying what is wrong."""
    text = " ".join(line.split())
    if text.startswith("@"):
        if text.lower() not in ALIASES:
            raise BadCron(f"{text!r} is not one of {', '.join(ALIASES)}.")
        return ALIASES[text.lower()]
    if len(text.split(" ")) != 5:
        raise BadCron("A cron line has five fields (minute hour day-of-month month day-of-week), such as '0 1 * * *'.")
    if not croniter.is_valid(text):
        raise BadCron(
            f"{text!r} is not a valid cron line: each field is a number in its range, *, a list, a range or a step."
        )
    try:
        croniter(text, datetime(2000, 1, 1), max_years_between_matches=NEVER_YEARS).get_next(datetime)
    except CroniterBadDateError:
        raise BadCron(f"{text!r} names no time that exists (such as 30 February).") from None
    return text


def describe(line: str) -> str:
    """The line as a sentence: "At 01:00 every day", "Every 15 minutes", "At 00:00, only on Sunday"."""
    fields = expression(line)
    options = Options()
    options.use_24hour_time_format = True
    options.verbose = False
    sentence = ExpressionDescriptor(fields, options).get_description()
    if fields.split(" ")[2:] == ["*", "*", "*"] and sentence.startswith("At ") and "," not in sentence:
        sentence += " every day"
    return sentence


def instant_of(wall: datetime, zone: ZoneInfo) -> datetime:
    """The UTC instant a naive wall time of `zone` names: its first occurrence when the clock repeats it,
    the first instant after the gap when the clock skips it."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    # In a gap: fold=1 reads it with the offset after the change, an instant before the change (and fold=0
    # one after it); the change is the first instant whose wall time is past `wall`.
    low, high = wall.replace(tzinfo=zone, fold=1).astimezone(UTC), first
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(zone).replace(tzinfo=None) >= wall:
            high = middle
        else:
            low = middle
    return high.replace(microsecond=0)


def planned_after(line: str, zone: ZoneInfo, after: datetime) -> Iterator[datetime]:
    """The planned instants (UTC) strictly after `after`, in order, each once; endless."""
    walls = croniter(expression(line), after.astimezone(zone).replace(tzinfo=None, second=0, microsecond=0))
    last = after
    while True:
        instant = instant_of(walls.get_next(datetime), zone)
        if instant > last:
            last = instant
            yield instant


def next_runs(line: str, zone: ZoneInfo, after: datetime, count: int = 5) -> list[datetime]:
    """The next `count` planned times, in the schedule's zone."""
    runs = planned_after(line, zone, after)
    return [next(runs).astimezone(zone) for _ in range(count)]


def planned_between(line: str, zone: ZoneInfo, start: datetime, end: datetime, most: int = 50_000) -> list[datetime]:
    """The planned instants in (start, end], at most `most` of them (a minutely line over a month is 44,640)."""
    found: list[datetime] = []
    for instant in planned_after(line, zone, start):
        if instant > end or len(found) >= most:
            break
        found.append(instant)
    return found
