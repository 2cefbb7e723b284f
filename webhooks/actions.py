"""A team's webhooks made, changed and removed: the one place the page and the API do it."""

from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from teams.models import Team
from webhooks import hosts
from webhooks.models import Event, Webhook
from webhooks.signing import new_secret


def clean_url(url: str) -> str:
    try:
        hosts.check(url)
    except hosts.NotAllowed as exc:
        raise ValidationError(str(exc)) from exc
    return url


def clean_events(events: Sequence[str]) -> list[str]:
    unknown = sorted(set(events) - set(Event.values))
    if unknown:
        raise ValidationError(f"Unknown events: {', '.join(unknown)}. Choose from {', '.join(Event.values)}.")
    if not events:
        raise ValidationError("Choose at least one event.")
    return [e for e in Event.values if e in events]  # each once, in the vocabulary's order


@transaction.atomic
def create_webhook(team: Team, *, url: str, events: Sequence[str], user: User, now: datetime) -> tuple[Webhook, str]:
    """A new webhook and its secret, the one time the secret is shown; at most E31_TEAM_MAX_WEBHOOKS a team."""
    # The team's row locked: two made at once cannot both take its last place.
    Team.objects.select_for_update().filter(pk=team.pk).first()
    cap = settings.E31_TEAM_MAX_WEBHOOKS
    if (count := Webhook.objects.filter(team=team).count()) >= cap:
        raise ValidationError(
            f"{team.name} has {count} webhooks and may have at most {cap} (E31_TEAM_MAX_WEBHOOKS): "
            "delete one to add another.",
            code="too_many_webhooks",
        )
    secret = new_secret()
    webhook = Webhook.objects.create(
        team=team, url=clean_url(url), events=clean_events(events), secret=secret, created_by=user, created_at=now
    )
    return webhook, secret
