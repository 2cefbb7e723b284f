"""A schedule's cron line: checked (standard cron only, croniter's extensions refused), said as a sentence, and
turned into planned instants in its time zone, daylight-saving changes decided here alone
(docs/reference/schedules.md)."""

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from cron_descriptor import ExpressionDescriptor, Options
from croniter import CroniterBadDateError, croniter

# cron's own aliases, and @nightly (01:00, this site's). @reboot is cron's too, but names no time: REFUSED_ALIASES.
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
    "@nightly": "0 1 * * *",
}
REFUSED_ALIASES = {
    "@reboot": "runs when a machine starts, and a schedule belongs to no machine",
}
# croniter gives up on a line that matches nothing for this long (e.g. 30 February).
NEVER_YEARS = 8


class BadCron(ValueError):
    pass


@dataclass(frozen=True)
class Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # spelled names, the first standing for `low`

    def value(self, part: str) -> int:
        return int(part) if part.isdigit() else self.low + self.names.index(part)


FIELDS = (
    Field("minute", 0, 59),
    Field("hour", 0, 23),
    Field("day-of-month", 1, 31),
    Field("month", 1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")),
    Field("day-of-week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)
# One item of a field's list: *, a value or a range of two, each maybe with a step.
ITEM = re.compile(r"(?:\*|(?P<first>[0-9]+|[a-z]{3})(?:-(?P<last>[0-9]+|[a-z]{3}))?)(?:/(?P<step>[0-9]+))?")
EXTENSIONS = {
    "R": "R (a random value)",
    "H": "H (a hashed value)",
    "L": "L (the last day)",
    "W": "W (the nearest weekday)",
    "#": "# (the nth weekday of the month)",
    "?": "? (no specific value)",
}
NAMES = "|".join(name for field in FIELDS for name in field.names)
STANDARD = "numbers, *, ranges (1-5), lists (1,3), steps (*/15) and month or day names (jan, mon-fri)"


@lru_cache(maxsize=1024)  # a pure function of the text, walked by every pass and page: checked once
def expression(line: str) -> str:
    text = " ".join(line.split())
    if text.startswith("@"):
        if text.lower() in REFUSED_ALIASES:
            raise BadCron(f"{text!r} is refused: it {REFUSED_ALIASES[text.lower()]}. A line is five fields or "
                          f"one of {', '.join(ALIASES)}.")  # fmt: skip
        if text.lower() not in ALIASES:
            raise BadCron(f"{text!r} is not one of {', '.join(ALIASES)}.")
        return ALIASES[text.lower()]
    fields = text.split(" ")
    if len(fields) != 5:
        extra = " (croniter's sixth field of seconds or years is not taken)" if len(fields) == 6 else ""
        raise BadCron(
            f"A cron line has five fields (minute hour day-of-month month day-of-week), such as '0 1 * * *'{extra}."
        )
    for field, value in zip(FIELDS, fields, strict=True):
        _check_field(text, field, value)
    if not croniter.is_valid(text):
        raise BadCron(
            f"{text!r} is not a valid cron line: each field is a number in its range, *, a list, a range or a step."
        )
    try:
        croniter(text, datetime(2000, 1, 1), max_years_between_matches=NEVER_YEARS).get_next(datetime)
    except CroniterBadDateError:
        raise BadCron(f"{text!r} names no time that exists (such as 30 February).") from None
    return text


def _check_field(text: str, field: Field, value: str) -> None:
    for item in value.lower().split(","):
        found = ITEM.fullmatch(item)
        names_ok = found is not None and all(
            part is None or part.isdigit() or part in field.names for part in (found["first"], found["last"])
        )
        if found is None or not names_ok:
            marks = [words for mark, words in EXTENSIONS.items() if mark.lower() in re.sub(NAMES, "", item)]
            what = f"uses {' and '.join(marks)}, an extension of croniter's" if marks else "is refused"
            raise BadCron(
                f"{text!r} is not standard cron: {item.upper() if marks else item!r} in the {field.name} field {what}. "
                f"A field takes {STANDARD}."
            )
        values = [field.value(part) for part in (found["first"], found["last"]) if part is not None]
        for part, number in zip((found["first"], found["last"]), values, strict=False):
            if not field.low <= number <= field.high:
                raise BadCron(
                    f"{text!r} is not a valid cron line: {part} is outside the {field.name} field's range, "
                    f"{field.low} to {field.high}."
                )
        if len(values) == 2 and values[0] > values[1]:  # croniter would wrap it around; cron refuses it
            raise BadCron(f"{text!r} is not a valid cron line: the range {item} of the {field.name} field ends before "
                          "it starts.")  # fmt: skip
        if found["step"] is not None and not 1 <= int(found["step"]) <= field.high:
            raise BadCron(
                f"{text!r} is not a valid cron line: the step /{found['step']} of the {field.name} field is not "
                f"from 1 to {field.high}."
            )


def describe(line: str) -> str:
    """ "At 01:00 every day", "Every 15 minutes"; a line saved before the checks refused it says why."""
    try:
        fields = expression(line)
    except BadCron as exc:
        return f"Not taken: {exc}"
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
    walls = croniter(expression(line), after.astimezone(zone).replace(tzinfo=None, second=0, microsecond=0))
    last = after
    while True:
        instant = instant_of(walls.get_next(datetime), zone)
        if instant > last:
            last = instant
            yield instant


def next_runs(line: str, zone: ZoneInfo, after: datetime, count: int = 5) -> list[datetime]:
    try:
        expression(line)
    except BadCron:
        return []
    runs = planned_after(line, zone, after)
    return [next(runs).astimezone(zone) for _ in range(count)]


def planned_between(line: str, zone: ZoneInfo, start: datetime, end: datetime, most: int = 50_000) -> list[datetime]:
    found: list[datetime] = []
    for instant in planned_after(line, zone, start):
        if instant > end or len(found) >= most:
            break
        found.append(instant)
    return found
