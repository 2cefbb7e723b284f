"""A moment as people and scripts type it in a query string: ISO 8601, a date or a date-time."""

from datetime import UTC, datetime

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime


def parse_moment(raw: str) -> datetime | None:
    """An ISO 8601 date or date-time in UTC (naive ones are in the site's time zone); None when it is
    not one. UTC because PostgreSQL takes offsets up to ±15:59 only, ISO 8601 up to ±23:59."""
    try:
        # Both parsers raise ValueError for a well-formed impossible date such as 2026-02-30.
        value = parse_datetime(raw)
        if value is None and (day := parse_date(raw)):
            value = datetime(day.year, day.month, day.day)
    except ValueError:
        return None
    if value is None:
        return None
    return (timezone.make_aware(value) if timezone.is_naive(value) else value).astimezone(UTC)


BAD_MOMENT = "Use an ISO 8601 date or date-time."
