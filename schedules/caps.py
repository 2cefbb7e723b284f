"""What a team's schedules may multiply: how many it has and how many runs they submit in one planned minute,
both counted under the team's row lock so two requests or passes at once cannot both take the same room."""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings

from accounting.budgets import lock_team
from schedules.models import RunStatus, Schedule, ScheduleRun
from teams.models import Team

MINUTE = timedelta(minutes=1)


class TooManySchedules(Exception):
    pass


def check_room(team: Team) -> None:
    """Paused ones count, since a resume is not refused. In the transaction that makes the schedule."""
    lock_team(team)
    most = settings.E31_TEAM_MAX_SCHEDULES
    if (has := Schedule.objects.filter(team=team).count()) >= most:
        raise TooManySchedules(
            f"The team {team.slug} has {has} schedules, the most E31_TEAM_MAX_SCHEDULES allows (paused ones "
            "count): delete one to make another, or ask an operator to raise the setting."
        )


class RunsPerMinute:
    """A team's runs per planned minute for one transaction of the due pass: read once per team and minute
    under the team's row lock (held to the commit), then counted on as the transaction submits."""

    def __init__(self) -> None:
        self.counted: dict[tuple[int, datetime], int] = {}
        self.refused: dict[tuple[int, datetime], bool] = {}

    def refusal(self, run: ScheduleRun, team: Team, *, zone: ZoneInfo) -> str:
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
        """Only the first run of a team's minute refused by the cap is heard: a hundred schedules due in one
        minute make one delivery per webhook, not a hundred."""
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
        self.counted[(team.pk, run.planned_at.replace(second=0, microsecond=0))] += 1


def _refused_words(team: Team) -> str:
    """No other refusal's reason begins so."""
    return f"Refused: the team {team.slug}'s schedules have submitted"
