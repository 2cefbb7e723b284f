"""Who wants which mail, and the mail waiting to be sent (an outbox: rows, so nothing is lost to a broker
outage and each mail is sent once)."""

from django.conf import settings
from django.db import models

from core.outcomes import Outcome
from jobs.models import Job, JobArray

# What ends a job and is mailed by default: everything but success.
DEFAULT_EMAIL_ON = [o.value for o in Outcome if o != Outcome.SUCCEEDED]


def default_email_on() -> list[str]:
    return list(DEFAULT_EMAIL_ON)


class Preference(models.Model):
    """A person's mail settings; no row: the defaults."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mail_preference")
    email_on = models.JSONField(default=default_email_on, blank=True, help_text="outcomes a mail is sent for")
    digest = models.BooleanField(default=True)
    digest_hour = models.PositiveSmallIntegerField(default=7, help_text="0–23, in the team's time zone")
    # The end of what the person's last digest covered: the next one starts there.
    digested_until = models.DateTimeField(null=True, blank=True)
    # The day whose digest was prepared, in their first team's zone: one a day, whatever the hour is changed to.
    digest_day = models.DateField(null=True, blank=True)

    def __str__(self) -> str:
        return f"mail of {self.user_id}"


class Mail(models.Model):
    """One mail to one person; `key` is unique, so a second pass writing the same mail finds it written."""

    class Kind(models.TextChoices):
        JOB = "job"
        ARRAY = "array"
        DIGEST = "digest"
        BUDGET = "budget"

    key = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    array = models.ForeignKey(JobArray, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    # Written when the mail is (digest, budget) or at its sending (job, array: read from the job then).
    subject = models.CharField(max_length=300, blank=True)
    body = models.TextField(blank=True)
    created_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    given_up = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="mail_waiting",
                condition=models.Q(sent_at__isnull=True, given_up=False),
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} mail to {self.user_id}"
