"""A team's webhooks and the log of their deliveries (an outbox: rows written with the event, sent by a
pass, so a broker outage or a crash loses none)."""

import uuid

from django.conf import settings
from django.db import models

from teams.models import Team


class Event(models.TextChoices):
    JOB_RELEASED = "job.released"
    ARRAY_RELEASED = "array.released"
    SCHEDULE_MISSED = "schedule.missed"
    SCHEDULE_REFUSED = "schedule.refused"
    BUDGET_WARNING = "budget.warning"


class Webhook(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=2000)
    events = models.JSONField(default=list, help_text="the Event names it is sent")
    # Kept as is: every delivery is signed with it (HMAC), so no hash of it would do.
    secret = models.CharField(max_length=100)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField()
    active = models.BooleanField(default=True)
    # The receiver its last attempt reached ("" before the first): the passes leave the webhook alone while
    # another attempt holds it, rather than resolve its URL to find it held.
    receiver = models.CharField(max_length=300, blank=True, default="")
    # After a failed attempt the webhook waits: a silent receiver sees one attempt at a time, not one per delivery.
    failures = models.PositiveIntegerField(default=0, help_text="failed attempts in a row")
    retry_at = models.DateTimeField(null=True, blank=True, help_text="no delivery of it is tried before")
    last_attempt_at = models.DateTimeField(null=True, blank=True, help_text="the passes serve the oldest first")

    class Meta:
        ordering = ["team", "pk"]
        indexes = [
            # When a team was served last, for each webhook a pass reads (webhooks.delivery._claims).
            models.Index(fields=["team", "-last_attempt_at"], name="webhook_served"),
        ]

    def __str__(self) -> str:
        return f"{self.team_id}: {self.url}"


class Delivery(models.Model):
    """One event for one webhook, tried until a 2xx answer or a day has passed."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"  # given up: no 2xx within a day

    class Answer(models.TextChoices):
        """What an attempt got, as its owner may know it: never a transport error's words (a port scanner's)."""

        OK = "2xx", "2xx"
        REDIRECT = "3xx", "3xx"  # a redirect not followed (too many, to nowhere, or to another receiver)
        CLIENT_ERROR = "4xx", "4xx"
        SERVER_ERROR = "5xx", "5xx"
        NO_ANSWER = "no answer", "no answer"  # none within the deadline, however it failed
        NOT_ALLOWED = "not allowed", "not allowed"  # the URL, or a redirect's, refused by E31_WEBHOOK_ALLOWED_HOSTS

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=20, choices=Event.choices)
    delivery_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    payload = models.JSONField()
    created_at = models.DateTimeField()
    attempts = models.PositiveSmallIntegerField(default=0)
    # While pending: when the next attempt is due (an attempt under way holds it a lease ahead).
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    # The last attempt's: the class of its answer, the HTTP status code (an answer's only) and its time.
    status_class = models.CharField(max_length=12, choices=Answer.choices, blank=True)
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    redelivery_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["next_attempt_at"], name="delivery_due", condition=models.Q(status="pending")),
            # A pass's question, for each webhook: has it a due delivery, and which is the oldest.
            models.Index(
                fields=["webhook", "next_attempt_at"],
                name="delivery_due_by_webhook",
                condition=models.Q(status="pending"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.delivery_id} {self.status}"


class ReceiverLease(models.Model):
    """A receiver (`address:port`) an attempt is under way to, across processes; one whose pass died ends at
    `until`, on the database's clock (a worker's own may be off)."""

    receiver = models.CharField(max_length=300, unique=True)
    holder = models.UUIDField()
    until = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.receiver} until {self.until:%H:%M:%S}"
