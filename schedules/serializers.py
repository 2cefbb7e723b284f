"""The schedules API's shapes: what a request may set (ScheduleRequest) and what every answer shows."""

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import serializers

from accounting.rates import RateBook
from core.bounds import COUNT, column_bounds
from core.names import showable_name
from jobtemplates.access import template_for
from jobtemplates.models import JobTemplate
from schedules import cron, listing
from schedules.forecast import forecast
from schedules.models import STARTING_DEADLINE_MAX_S, Concurrency, RunStatus, Schedule, ScheduleRun
from schedules.submitting import problems
from teams.access import chosen_team, teams_of
from teams.models import Team, validate_time_zone

_MOMENT = serializers.DateTimeField()  # DRF's own conversion, used unbound by the presenters
TEMPLATE_ID = column_bounds(JobTemplate, "id", least=1)


def _when(moment: datetime | None) -> str | None:
    return None if moment is None else _MOMENT.to_representation(moment)


def team_of(user: User, slug: str | None) -> Team:
    try:
        return chosen_team({t.slug: t for t in teams_of(user)}, slug)
    except DjangoValidationError as refused:
        raise serializers.ValidationError({"team": refused.messages}) from None


class ScheduleRequest(serializers.Serializer):
    """The body of POST (every field but those with a default required) and PATCH (any of them)."""

    team = serializers.SlugField(required=False, help_text="The team's slug; needed when you are in more than one.")
    name = serializers.CharField(max_length=200, validators=[showable_name])
    cron = serializers.CharField(
        max_length=200, help_text="Five fields (minute hour day-of-month month day-of-week), or @hourly, @daily "
        "(@midnight), @nightly (01:00), @weekly, @monthly, @yearly (@annually); in the schedule's time zone."
    )  # fmt: skip
    template = serializers.IntegerField(
        **TEMPLATE_ID, required=False, allow_null=True, help_text="A job template of the team: each run submits it."
    )
    job = serializers.DictField(
        required=False, allow_null=True, help_text="The fields POST /api/v1/jobs/ takes (with `indices`: an array)."
    )
    time_zone = serializers.CharField(
        required=False, max_length=64, help_text="An IANA zone the cron line is read in; default: the team's."
    )
    concurrency = serializers.ChoiceField(
        choices=Concurrency.choices, required=False, default=Concurrency.ALLOW,
        help_text="While the last run is not released: allow another, forbid (skip) it, or replace (cancel) the last.",
    )  # fmt: skip
    starting_deadline_s = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=STARTING_DEADLINE_MAX_S, default=None,
        help_text="A run later than this many seconds (at most a year) is recorded missed; none: a late run is "
        "still submitted.",
    )  # fmt: skip
    paused = serializers.BooleanField(required=False, default=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Checks what the schedule will have, not only what the request sends (context: `user`, `schedule`)."""
        user: User = self.context["user"]
        schedule: Schedule | None = self.context.get("schedule")
        if schedule is None:
            attrs["team"] = team = team_of(user, attrs.get("team"))
            attrs.setdefault("time_zone", team.time_zone)
        elif "team" in attrs and attrs["team"] != schedule.team.slug:
            raise serializers.ValidationError({"team": ["A schedule's team cannot change: make another schedule."]})
        else:
            attrs["team"] = team = schedule.team
        if schedule is not None and "cron" not in attrs and (attrs.get("paused") is False or "time_zone" in attrs):
            try:  # a line saved before the checks refused it cannot be planned again: it must be replaced
                cron.expression(schedule.cron)
            except cron.BadCron as exc:
                raise serializers.ValidationError({"cron": [f"{exc} Give the schedule a standard line."]}) from None
        if attrs.get("template") is not None:
            try:
                attrs["template"] = chosen = template_for(user, attrs["template"])
            except Http404:  # a value of the body, not the URL's object: said at its field
                raise serializers.ValidationError({"template": ["No template you can see has this id."]}) from None
            if chosen.team_id not in (None, team.pk):
                raise serializers.ValidationError({"template": [f"Not a template of team {team.slug}."]})
        if schedule is None or {"template", "job"} & set(attrs):
            template, job = attrs.get("template"), attrs.get("job")
            if schedule is not None:  # one given replaces the other; neither given keeps both
                template = template if "template" in attrs else (None if job is not None else schedule.template)
                job = job if "job" in attrs else (None if template is not None else schedule.job)
            if (template is None) == (job is None):
                raise serializers.ValidationError(
                    {"non_field_errors": ["Give exactly one of template and job: what each run submits."]}
                )
            # Who changes what it runs becomes who its runs are submitted as (schedules.changes).
            if found := problems(team=team, user=user, template=template, job=job):
                raise serializers.ValidationError(found)
            attrs["template"], attrs["job"] = template, job
        return attrs

    def job_problems(self) -> dict[str, list[str]]:
        """What `validate` would say of the job (DRF runs it only when every field is valid)."""
        if any(field == "job" or field.startswith("job.") for field in self.errors):
            return {}
        job, template = self.initial_data.get("job"), self.initial_data.get("template")
        if job is None or template is not None:
            return {}
        user: User = self.context["user"]
        schedule: Schedule | None = self.context.get("schedule")
        try:
            team = schedule.team if schedule is not None else team_of(user, self.initial_data.get("team"))
        except serializers.ValidationError:
            return {}
        return problems(team=team, user=user, template=None, job=job)

    def validate_cron(self, value: str) -> str:
        try:
            cron.expression(value)
        except cron.BadCron as exc:
            raise serializers.ValidationError(str(exc)) from None
        return " ".join(value.split())

    def validate_time_zone(self, value: str) -> str:
        try:
            validate_time_zone(value)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.messages) from None
        return value


class LastRunSerializer(serializers.Serializer):
    planned_at = serializers.DateTimeField()
    status = serializers.ChoiceField(choices=RunStatus.choices)
    job = serializers.CharField(allow_null=True, help_text="the job's id, or the array's")
    array = serializers.UUIDField(allow_null=True)
    reason = serializers.CharField()
    outcome = serializers.CharField(help_text="how the job (or array) ended; empty until released")


class ScheduleRunSerializer(LastRunSerializer):
    """A planned time of a schedule and what became of it."""

    def to_representation(self, run: ScheduleRun) -> dict[str, Any]:
        return run_as_dict(run)


class BudgetSerializer(serializers.Serializer):
    month = serializers.CharField()
    limit = serializers.CharField()
    spent = serializers.CharField()
    committed = serializers.CharField()
    left = serializers.CharField()


class ForecastSerializer(serializers.Serializer):
    runs_left = serializers.IntegerField(**COUNT, help_text="planned times from now to the end of the budget's month")
    tasks_per_run = serializers.IntegerField(**COUNT)
    unit = serializers.CharField(help_text="the budget's unit: money or core_hours")
    currency = serializers.CharField()
    per_run = serializers.CharField(allow_null=True, help_text="a run's worst case (null: cannot be costed)")
    total = serializers.CharField()
    words = serializers.CharField()
    budget = BudgetSerializer(allow_null=True)


class ScheduleSerializer(serializers.Serializer):
    """A schedule as every answer shows it. The context carries `now`, `book` (a RateBook) and `teams`:
    {team id: (standing, unit)} of the teams shown, read once."""

    id = serializers.IntegerField(**column_bounds(Schedule, "id", least=1))
    name = serializers.CharField()
    team = serializers.CharField()
    cron = serializers.CharField()
    description = serializers.CharField(help_text='the cron line as a sentence: "At 01:00 every day"')
    time_zone = serializers.CharField()
    template = serializers.IntegerField(**TEMPLATE_ID, allow_null=True)
    job = serializers.DictField(allow_null=True)
    concurrency = serializers.ChoiceField(choices=Concurrency.choices)
    starting_deadline_s = serializers.IntegerField(min_value=0, max_value=STARTING_DEADLINE_MAX_S, allow_null=True)
    paused = serializers.BooleanField()
    next_runs = serializers.ListField(child=serializers.DateTimeField(), help_text="five, in the schedule's zone")
    last_run = LastRunSerializer(allow_null=True)
    forecast = ForecastSerializer()
    created_by = serializers.CharField(allow_null=True, help_text="who made it")
    runner = serializers.CharField(
        read_only=True, help_text="the person its runs are submitted as: its creator, or the member of the team who "
        "last changed what it runs (its job, its template or the template's files) once another member has",
    )  # fmt: skip
    created_at = serializers.DateTimeField()
    changed_at = serializers.DateTimeField()

    def to_representation(self, schedule: Schedule) -> dict[str, Any]:
        now: datetime = self.context["now"]
        book: RateBook = self.context["book"]
        standing, unit = self.context["teams"].get(schedule.team_id, (None, None))
        recent = recent_runs(schedule)
        return {
            "id": schedule.pk, "name": schedule.name, "team": schedule.team.slug, "cron": schedule.cron,
            "description": cron.describe(schedule.cron), "time_zone": schedule.time_zone,
            "template": schedule.template_id, "job": schedule.job, "concurrency": schedule.concurrency,
            "starting_deadline_s": schedule.starting_deadline_s, "paused": schedule.paused,
            "next_runs": [t.isoformat() for t in cron.next_runs(schedule.cron, ZoneInfo(schedule.time_zone), now)],
            "last_run": run_as_dict(recent[0]) if recent else None,
            "forecast": forecast(schedule, now=now, book=book, standing=standing, unit=unit).as_dict(),
            "created_by": schedule.created_by.username if schedule.created_by_id else None,
            "runner": schedule.runs_as.username,
            "created_at": _when(schedule.created_at), "changed_at": _when(schedule.changed_at),
        }  # fmt: skip


def recent_runs(schedule: Schedule) -> list[ScheduleRun]:
    found = getattr(schedule, "recent_runs", None)
    if found is None:
        found = list(schedule.runs.select_related("job", "array").order_by("-planned_at")[:1])
    return found


def run_as_dict(run: ScheduleRun) -> dict[str, Any]:
    job_id = run.job_id or run.array_id
    return {
        "planned_at": _when(run.planned_at), "status": run.status, "job": str(job_id) if job_id else None,
        "array": str(run.array_id) if run.array_id else None, "reason": run.reason, "outcome": listing.outcome_of(run),
    }  # fmt: skip
