import zoneinfo
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def validate_time_zone(name: str) -> None:
    if name not in zoneinfo.available_timezones():
        raise ValidationError(f"{name!r} is not an IANA time zone name (such as Europe/Paris).")


class Team(models.Model):
    slug = models.SlugField(unique=True, max_length=50)
    name = models.CharField(max_length=200)
    requires_strong_isolation = models.BooleanField(
        default=False, help_text="every job of this team runs with isolation=strong (gVisor)"
    )
    # Where the team's morning is: the review page's default start (18:00 the day before) is in it.
    time_zone = models.CharField(
        max_length=64, default="UTC", validators=[validate_time_zone], help_text="an IANA name, e.g. Europe/Paris"
    )
    # Retention (jobs.storage.retention), set by operators.
    retention_days = models.PositiveIntegerField(
        null=True, blank=True, help_text="days its jobs' data and outputs are kept after release; empty: the default"
    )
    pin_days = models.PositiveIntegerField(
        default=0, help_text="days beyond that a member may pin a job's outputs for; 0: pinning not allowed"
    )
    members: "models.ManyToManyField[User, Membership]" = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def zone(self) -> zoneinfo.ZoneInfo:
        try:
            return zoneinfo.ZoneInfo(self.time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            return zoneinfo.ZoneInfo("UTC")


class Membership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="one_membership_per_team")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team}"


class ApiToken(models.Model):
    """A key kept as its sha256 only, so a copy of the database gives no one a way into the API."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True, help_text="what it is for, e.g. the nightly cron on build-3")
    digest = models.CharField(max_length=64, unique=True, help_text="sha256 of the key, hex")
    prefix = models.CharField(max_length=8, help_text="the key's first characters, to tell keys apart")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name or self.prefix + '…'} of {self.user}"
