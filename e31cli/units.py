"""The command line's short forms: memory (512M, 2G) and times (a date, or 24h ago)."""

import re
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

MEMORY = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
# core.when.DURATION, which this package may not import; tests/e31cli/test_units.py keeps the two alike.
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
    """An ISO 8601 date or date-time as given, or a duration back from now (`24h`) as a UTC date-time."""
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
    """Costs to the cent and seconds to a tenth, rounded half up, as tables show them; --json keeps them exact."""
    places = "0.01" if column == "cost" else "0.1" if column.endswith("seconds") else None
    if places is None or value is None:
        return "—" if value is None else str(value)
    try:
        return str(Decimal(str(value)).quantize(Decimal(places), rounding=ROUND_HALF_UP))
    except InvalidOperation:
        return str(value)
