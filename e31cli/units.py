"""The short forms of the command line: memory (512M, 2G), durations (90s, 30m, 2h) and times (24h ago, a date)."""

import re
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

MEMORY = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
DURATION = re.compile(r"^\s*(\d+)\s*([smhd]?)\s*$", re.IGNORECASE)
MB = {"k": 1 / 1024, "m": 1, "": 1, "g": 1024, "t": 1024 * 1024}
SECONDS = {"s": 1, "": 1, "m": 60, "h": 3600, "d": 86400}


def memory_mb(text: str) -> int:
    """`512M`, `2G`, `1536` (MB) → whole megabytes."""
    found = MEMORY.match(text)
    if not found:
        raise ValueError(f"{text!r} is not a memory size such as 512M or 2G")
    mb = int(found[1]) * MB[found[2].lower()]
    if mb < 1 or mb != int(mb):
        raise ValueError(f"{text!r} is not a whole number of megabytes")
    return int(mb)


def duration_s(text: str) -> int:
    """`90s`, `30m`, `2h`, `1d`, `600` (seconds) → seconds."""
    found = DURATION.match(text)
    if not found or int(found[1]) < 1:
        raise ValueError(f"{text!r} is not a duration such as 90s, 30m or 2h")
    return int(found[1]) * SECONDS[found[2].lower()]


def when(text: str, *, now: datetime | None = None) -> str:
    """A time for the API's since/until: an ISO 8601 date or date-time as given, or a duration back from
    now (`24h`, `7d`) as an ISO date-time in UTC."""
    if DURATION.match(text):
        moment = (now or datetime.now(UTC)) - timedelta(seconds=duration_s(text))
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
