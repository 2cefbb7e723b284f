"""Whose webhooks a person may see and change: their teams' (any member's); another team's are 404."""

import uuid

from django.db.models import QuerySet
from django.http import Http404

from teams.access import AnyUser, teams_of
from webhooks.models import Delivery, Webhook


def webhooks_for(user: AnyUser) -> QuerySet[Webhook]:
    return Webhook.objects.filter(team__in=teams_of(user)).select_related("team", "created_by")


def webhook_for(user: AnyUser, webhook_id: int | str) -> Webhook:
    found = webhooks_for(user).filter(pk=webhook_id).first()
    if found is None:
        raise Http404("No such webhook.")
    return found


def delivery_of(webhook: Webhook, delivery_id: uuid.UUID | str) -> Delivery:
    found = webhook.deliveries.filter(delivery_id=delivery_id).select_related("webhook").first()
    if found is None:
        raise Http404("No such delivery.")
    return found
