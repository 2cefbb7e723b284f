"""What a team's schedules may multiply: how many it has (E31_TEAM_MAX_SCHEDULES) and how many runs they submit
with planned times in one minute (E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE). Both are counted under the team's
row lock (accounting.budgets.lock_team, the lock its submissions take), so two requests or passes at once
cannot both pass on the same room."""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings

from accounting.budgets import lock_team
from schedules.models import RunStatus, Schedule, ScheduleRun
from teams.models import Team

MINUTE = timedelta(minutes=1)


class TooManySchedules(Exception):
    """The team has as many schedules as E31_TEAM_MAX_SCHEDULES allows; the text says so (a 409)."""


def check_room(team: Team) -> None:
    """Raise TooManySchedules when the team cannot have one schedule more: paused ones count, since a resume
    is not refused. Call it in the transaction that makes the schedule: the team's row stays locked."""
    lock_team(team)
    most = settings.E31_TEAM_MAX_SCHEDULES
    if (has := Schedule.objects.filter(team=team).count()) >= most:
        raise TooManySchedules(
            f"The team {team.slug} has {has} schedules, the most E31_TEAM_MAX_SCHEDULES allows (paused ones "
            "count): delete one to make another, or ask an operator to raise the setting."
        )


class RunsPerMinute:
    """The runs a team's schedules submitted per planned minute (UTC), for one transaction of the due pass:
    read from the rows once per team and minute, under the team's row lock (held to the commit, so passes at
    once count each other's), then counted on as the transaction submits. Likewise whether the minute has
    a run refused by the cap yet (`first_refused`)."""

    def __init__(self) -> None:
        self.counted: dict[tuple[int, datetime], int] = {}
        self.refused: dict[tuple[int, datetime], bool] = {}

    def refusal(self, run: ScheduleRun, team: Team, *, zone: ZoneInfo) -> str:
        """Why this run may not be submitted (the team's runs of its minute are at the cap); "" when it may."""
        minute = run.planned_at.replace(second=0, microsecond=0)
        key = (team.pk, minute)
        if key not in self.counted:
            lock_team(team)
            submitted = ScheduleRun.objects.filter(
                schedule__team=team, status=RunStatus.SUBMITTED, planned_at__gte=minute, planned_at__lt=minute + MINUTE
            )
            self.counted[key] = submitted.exclude(pk=run.pk).count()
        most = settings.E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE
        if self.counted[key] < most:
            return ""
        return (
            f"{_refused_words(team)} {self.counted[key]} runs planned in the minute of "
            f"{minute.astimezone(zone):%Y-%m-%d %H:%M %Z}, the most E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE allows: "
            "spread their times over more minutes."
        )

    def first_refused(self, run: ScheduleRun, team: Team) -> bool:
        """Whether this run, refused by `refusal`, is the first of its team and planned minute refused by the
        cap, in this transaction or before it: only that one is heard (webhooks, as schedule.refused), so a team
        with a hundred schedules due in one minute makes one delivery per webhook, not seventy. The team's row
        is locked (by `refusal`), so two passes at once cannot both find theirs the first."""
        minute = run.planned_at.replace(second=0, microsecond=0)
        key = (team.pk, minute)
        if key not in self.refused:
            before = ScheduleRun.objects.filter(
                schedule__team=team, status=RunStatus.REFUSED, planned_at__gte=minute, planned_at__lt=minute + MINUTE,
                reason__startswith=_refused_words(team),
            )  # fmt: skip
            self.refused[key] = before.exclude(pk=run.pk).exists()
        first, self.refused[key] = not self.refused[key], True
        return first

    def submitted(self, run: ScheduleRun, team: Team) -> None:
        """Count a run this transaction submitted (after `refusal` said it may be)."""
        self.counted[(team.pk, run.planned_at.replace(second=0, microsecond=0))] += 1


def _refused_words(team: Team) -> str:
    """How the reason of a run refused by the cap begins: no other refusal's reason begins so (the budget's
    words, the submission form's by field)."""
    return f"Refused: the team {team.slug}'s schedules have submitted"
