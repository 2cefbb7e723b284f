"""Numbers as people read them: one way to write each kind (money, moments, durations, core-hours, shares,
counts, outcomes), used by every page and mail; the API and the CSV keep their exact machine values.

Each function takes None (and, where a float can be one, a value that is not finite) and answers "—".
"""

from datetime import datetime, timedelta, tzinfo
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation, localcontext

from django.utils import timezone

from core.outcomes import Outcome

NONE = "—"
CENT = Decimal("0.01")
Number = int | float | Decimal | str  # text as the API and the statements keep it ("165.857000")


def _decimal(value: Number | None) -> Decimal | None:
    if value is None:
        return None
    try:
        number = value if isinstance(value, Decimal) else Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() else None


def _grouped(number: Decimal, places: int) -> str:
    with localcontext(prec=max(28, number.adjusted() + places + 2)):  # a huge amount is still exact
        text = f"{number.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP):,.{places}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.,") else text


def money(amount: Number | None, currency: str) -> str:
    """To the cent: "0.52 EUR"; "less than 0.01 EUR" above 0, so a job that cost something never reads as free."""
    return _to_the_cent(amount, currency, small="less than")


def moment(value: datetime | None, zone: tzinfo | None = None) -> str:
    """2026-12-06 20:08, in `zone` (by default the one active: the viewer's team zone on a page)."""
    if value is None:
        return NONE
    try:
        value = timezone.localtime(value, zone)
    except OverflowError:  # the calendar's edge (year 1 or 9999) moved past it by the zone: as kept, in UTC
        pass
    return f"{value:%Y-%m-%d %H:%M}"


def since(value: datetime | None, now: datetime | None = None) -> str:
    """2 h 05 m ago."""
    if value is None:
        return NONE
    return f"{duration((now or timezone.now()) - value)} ago"


def duration(value: timedelta | Number | None) -> str:
    """45 s, 2 m 46 s, 1 h 05 m, 3 d 4 h; under a second "< 1 s"; a negative span (clocks apart) 0 s."""
    seconds = _decimal(value.total_seconds() if isinstance(value, timedelta) else value)
    if seconds is None:
        return NONE
    if 0 < seconds < 1:
        return "< 1 s"
    whole = max(0, int(seconds.quantize(Decimal(1), rounding=ROUND_HALF_UP)))
    if whole < 60:
        return f"{whole} s"
    minutes, s = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} m {s:02d} s"
    hours, m = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {m:02d} m"
    days, h = divmod(hours, 24)
    return f"{days:,} d {h} h"


def core_hours(value: Number | None) -> str:
    """To two places: "0.17 core-hours"; a positive amount that rounds to nothing is "< 0.01"."""
    return _to_the_cent(value, "core-hours", small="<")


def _to_the_cent(value: Number | None, unit: str, *, small: str) -> str:
    number = _decimal(value)
    if number is None:
        return NONE
    if 0 < number < CENT / 2:
        return f"{small} 0.01 {unit}"
    return f"{_grouped(number, 2)} {unit}"


def percent(ratio: Number | None) -> str:
    """A ratio (0.345, or the API's "0.3450") as "34.5 %", "34 %", "100 %"; a tiny positive one "< 0.1 %"."""
    number = _decimal(ratio)
    if number is None:
        return NONE
    hundredths = number * 100
    if 0 < hundredths < Decimal("0.05"):
        return "< 0.1 %"
    text = _grouped(hundredths, 1)
    return f"{text.removesuffix('.0')} %"


def count(n: int | None, unit: str, plural: str = "") -> str:
    """Plural unless it is one: "1 core", "2 cores", "0 gpus"."""
    if n is None:
        return NONE
    return f"{n:,} {unit if n == 1 else plural or unit + 's'}"


def outcome_label(value: str | None) -> str:
    """How a job ended in words ("out of memory"), never the stored value; "" for a job not ended."""
    if not value:
        return ""
    try:
        return str(Outcome(value).label).lower()
    except ValueError:  # a value this version does not know: still readable
        return value.replace("_", " ")
