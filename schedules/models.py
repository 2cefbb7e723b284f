"""A schedule: a job (or array) a team declares once, submitted at each time its cron line names."""

from django.conf import settings
from django.contrib.auth.models import User
from django.db import models

from jobs.models import Job, JobArray
from jobtemplates.models import JobTemplate
from teams.models import Team, validate_time_zone


class Concurrency(models.TextChoices):
    """What a run does while the schedule's last run is not released yet (Kubernetes CronJob's policy)."""

    ALLOW = "allow"  # submitted all the same
    FORBID = "forbid"  # skipped
    REPLACE = "replace"  # the last run is cancelled, this one submitted


# A deadline longer than a year says no more than none (null) does; the column holds no more than 2**31 - 1.
STARTING_DEADLINE_MAX_S = 366 * 24 * 3600


class Schedule(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="schedules")
    name = models.CharField(max_length=200)
    cron = models.CharField(
        max_length=200, help_text="five fields, or @hourly, @daily, @nightly (01:00), @weekly, @monthly, @yearly"
    )
    time_zone = models.CharField(max_length=64, validators=[validate_time_zone])
    # What each run submits: a template of the team (as it is at the run), or a job's fields as the API takes them.
    template = models.ForeignKey(
        JobTemplate, null=True, blank=True, on_delete=models.SET_NULL, related_name="schedules"
    )
    job = models.JSONField(null=True, blank=True)
    concurrency = models.CharField(max_length=8, choices=Concurrency.choices, default=Concurrency.ALLOW)
    starting_deadline_s = models.PositiveIntegerField(
        null=True, blank=True, help_text="a run later than this is missed; none: one late run is still submitted"
    )
    paused = models.BooleanField(default=False)
    # The next planned time not yet recorded (UTC); the due pass reads schedules by it.
    next_run_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="schedules")
    # Whom its runs are submitted as: None while what it runs is what its creator saw (schedules.changes).
    runner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField()
    changed_at = models.DateTimeField()

    class Meta:
        ordering = ["team", "name", "pk"]
        indexes = [models.Index(fields=["next_run_at"], condition=models.Q(paused=False), name="schedule_due")]

    def __str__(self) -> str:
        return f"{self.name} ({self.cron})"

    @property
    def runs_as(self) -> User:
        return self.created_by if self.runner is None else self.runner


class RunStatus(models.TextChoices):
    SUBMITTED = "submitted"
    SKIPPED = "skipped"  # concurrency forbid: the last run was still going
    MISSED = "missed"  # later than starting_deadline_s, or superseded by a later late run
    REFUSED = "refused"  # the submission was refused: over budget, a template gone, a member gone…


class ScheduleRun(models.Model):
    """The unique row is what makes a run happen exactly once, however many passes see it."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="runs")
    planned_at = models.DateTimeField()
    status = models.CharField(max_length=10, choices=RunStatus.choices)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="schedule_runs")
    array = models.ForeignKey(JobArray, null=True, blank=True, on_delete=models.SET_NULL, related_name="schedule_runs")
    reason = models.TextField(blank=True)
    recorded_at = models.DateTimeField()

    class Meta:
        ordering = ["schedule", "-planned_at"]
        constraints = [models.UniqueConstraint(fields=["schedule", "planned_at"], name="one_run_per_planned_time")]
        indexes = [
            # The digest's missed and refused runs of a team since a time.
            models.Index(fields=["recorded_at"], name="schedule_run_not_submitted",
                         condition=~models.Q(status="submitted")),
        ]  # fmt: skip

    def __str__(self) -> str:
        return f"{self.schedule_id} at {self.planned_at:%Y-%m-%d %H:%M} {self.status}"


class ScheduleEvent(models.Model):
    """Kept after the schedule's deletion; no actor and a reason when the platform paused it on its own."""

    class Action(models.TextChoices):
        CREATED = "created"
        CHANGED = "changed"
        PAUSED = "paused"
        RESUMED = "resumed"
        DELETED = "deleted"

    schedule = models.ForeignKey(Schedule, null=True, on_delete=models.SET_NULL, related_name="events")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    schedule_name = models.CharField(max_length=200)
    action = models.CharField(max_length=8, choices=Action.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    at = models.DateTimeField()
    changes = models.JSONField(default=dict, blank=True)  # field: [before, after]
    reason = models.TextField(blank=True, default="")  # why the platform acted; empty when a person did

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"{self.schedule_name} {self.action} by {self.actor_id}"
