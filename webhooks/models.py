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

    class Meta:
        ordering = ["team", "pk"]

    def __str__(self) -> str:
        return f"{self.team_id}: {self.url}"


class Delivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"  # given up: no 2xx within a day

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=20, choices=Event.choices)
    delivery_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    payload = models.JSONField()
    created_at = models.DateTimeField()
    attempts = models.PositiveSmallIntegerField(default=0)
    # While pending: when the next attempt is due (an attempt under way holds it a lease ahead).
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    redelivery_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["next_attempt_at"], name="delivery_due", condition=models.Q(status="pending")),
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.delivery_id} {self.status}"
