"""The due pass: each planned time of a schedule recorded once, as a run submitted, skipped, missed or refused."""

from datetime import datetime
from zoneinfo import ZoneInfo

from schedules import cron
from schedules.models import Schedule


def first_planned(schedule: Schedule, *, now: datetime) -> datetime:
    """The schedule's next planned instant after `now` (UTC): its next_run_at once created, resumed or replanned."""
    return next(cron.planned_after(schedule.cron, ZoneInfo(schedule.time_zone), now))
