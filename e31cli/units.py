"""The short forms of the command line: memory (512M, 2G) and times (a date, or 24h ago). A time limit
(`--time`) is sent as typed: the server reads durations (core.when.parse_duration), so the form, the API
and the command line take the same ones and refuse them with the same words."""

import re
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

MEMORY = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
# The server's grammar of durations (core.when.DURATION, which this package may not import), for a time
# back from now; tests/e31cli/test_units.py holds the two to the same answers.
DURATION = re.compile(r"^\s*(?:(\d+)\s*d)?\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m(?:in)?)?\s*(?:(\d+)\s*s?)?\s*$", re.I)
MB = {"k": 1 / 1024, "m": 1, "": 1, "g": 1024, "t": 1024 * 1024}


def memory_mb(text: str) -> int:
    """`512M`, `2G`, `1536` (MB) → whole megabytes."""
    found = MEMORY.match(text)
    if not found:
        raise ValueError(f"{text!r} is not a memory size such as 512M or 2G")
    mb = int(found[1]) * MB[found[2].lower()]
    if mb < 1 or mb != int(mb):
        raise ValueError(f"{text!r} is not a whole number of megabytes")
    return int(mb)


def ago_s(text: str) -> int | None:
    """Seconds of a duration back from now (`24h`, `7d`, `1h30m`, `600`), or None when it is not one."""
    found = DURATION.match(text)
    if not found or not any(found.groups()) or any(len(g) > 9 for g in found.groups() if g):
        return None
    days, hours, minutes, seconds = (int(g or 0) for g in found.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def when(text: str, *, now: datetime | None = None) -> str:
    """A time for the API's since/until: an ISO 8601 date or date-time as given, or a duration back from
    now (`24h`, `7d`) as an ISO date-time in UTC."""
    if (seconds := ago_s(text)) is not None:
        try:
            moment = (now or datetime.now(UTC)) - timedelta(seconds=seconds)
        except OverflowError:
            raise ValueError(f"{text!r} reaches back before the calendar") from None
        return moment.isoformat(timespec="seconds")
    try:
        datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is neither an ISO 8601 date or date-time nor a duration such as 24h") from None
    return text


def figure(column: str, value: object) -> str:
    """A usage or record figure as a table shows it: costs to the cent and seconds to a tenth, rounded
    half up (the API's --json keeps the exact values); anything else as it came."""
    places = "0.01" if column == "cost" else "0.1" if column.endswith("seconds") else None
    if places is None or value is None:
        return "—" if value is None else str(value)
    try:
        return str(Decimal(str(value)).quantize(Decimal(places), rounding=ROUND_HALF_UP))
    except InvalidOperation:
        return str(value)
