"""What a member can multiply is capped, each cap a setting named in its answer: a team's webhooks
(E31_TEAM_MAX_WEBHOOKS, a 400 on the API and the page) and a webhook's redeliveries a minute
(E31_WEBHOOK_REDELIVERIES_PER_MINUTE, a 429 with Retry-After)."""

import pytest
from django.utils import timezone

from tests.factories import webhook_of
from webhooks.delivery import enqueue
from webhooks.models import Delivery, Webhook

pytestmark = pytest.mark.usefixtures("webhooks_on")

WEBHOOKS = "/api/v1/webhooks/"
PAGE = "/account/webhooks/"
HTMX = {"HTTP_HX_REQUEST": "true"}
HOOK = "http://127.0.0.1:19009/hook"


def test_one_webhook_past_the_teams_cap_is_a_400_naming_the_setting(api, member, team, outsider, other_team, settings):
    settings.E31_TEAM_MAX_WEBHOOKS = 3
    for _ in range(3):
        assert api.post(WEBHOOKS, {"url": HOOK, "events": ["job.released"]}, format="json").status_code == 201

    refused = api.post(WEBHOOKS, {"url": HOOK, "events": ["job.released"]}, format="json")

    assert refused.status_code == 400
    assert refused.json() == {
        "non_field_errors": [
            "Red team has 3 webhooks and may have at most 3 (E31_TEAM_MAX_WEBHOOKS): delete one to add another."
        ]
    }
    assert Webhook.objects.filter(team=team).count() == 3
    webhook_of(other_team, outsider, HOOK)  # another team's count is its own


def test_a_webhook_deleted_makes_room_for_another(api, member, team, settings):
    settings.E31_TEAM_MAX_WEBHOOKS = 1
    first = api.post(WEBHOOKS, {"url": HOOK, "events": ["job.released"]}, format="json").json()
    assert api.post(WEBHOOKS, {"url": HOOK, "events": ["job.released"]}, format="json").status_code == 400

    assert api.delete(f"{WEBHOOKS}{first['id']}/").status_code == 204

    assert api.post(WEBHOOKS, {"url": HOOK, "events": ["job.released"]}, format="json").status_code == 201


def test_the_page_refuses_one_webhook_past_the_cap_naming_the_setting(client, member, team, settings):
    settings.E31_TEAM_MAX_WEBHOOKS = 2
    webhook_of(team, member, HOOK)
    webhook_of(team, member, HOOK)
    client.force_login(member)

    response = client.post(PAGE, {"url": HOOK, "events": ["job.released"]}, **HTMX)

    page = response.content.decode()
    assert response.status_code == 400
    assert "Red team has 2 webhooks and may have at most 2 (E31_TEAM_MAX_WEBHOOKS)" in page
    assert 'role="alert"' in page and 'id="new-webhook"' not in page  # no secret shown: none made
    assert Webhook.objects.count() == 2


def test_redeliveries_past_the_rate_are_a_429_with_retry_after_naming_the_setting(api, member, team, settings):
    settings.E31_WEBHOOK_REDELIVERIES_PER_MINUTE = 2
    webhook, _ = webhook_of(team, member, HOOK)
    other, _ = webhook_of(team, member, "http://127.0.0.1:19010/other")
    first, elsewhere = enqueue(team.pk, "job.released", {}, now=timezone.now())
    path = f"{WEBHOOKS}{webhook.pk}/deliveries/{first.delivery_id}/redeliver/"

    taken = [api.post(path).status_code for _ in range(2)]
    refused = api.post(path)

    assert taken == [201, 201]
    assert refused.status_code == 429
    assert 55 <= int(refused["Retry-After"]) <= 60
    assert refused.json()["detail"] == (
        "A webhook's deliveries may be sent again at most 2 times a minute (E31_WEBHOOK_REDELIVERIES_PER_MINUTE): "
        f"try again in {refused['Retry-After']} s."
    )
    assert Delivery.objects.filter(redelivery_of=first).count() == 2
    # Counted per webhook: another webhook of the team redelivers still.
    assert api.post(f"{WEBHOOKS}{other.pk}/deliveries/{elsewhere.delivery_id}/redeliver/").status_code == 201


def test_the_page_says_when_redeliveries_are_past_the_rate(client, member, team, settings):
    settings.E31_WEBHOOK_REDELIVERIES_PER_MINUTE = 1
    webhook, _ = webhook_of(team, member, HOOK)
    first = enqueue(team.pk, "job.released", {}, now=timezone.now())[0]
    client.force_login(member)
    path = f"{PAGE}{webhook.pk}/deliveries/{first.delivery_id}/redeliver/"

    assert client.post(path, **HTMX).status_code == 200
    refused = client.post(path, **HTMX)

    fragment = refused.content.decode()
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 60
    assert "may be sent again at most once a minute (E31_WEBHOOK_REDELIVERIES_PER_MINUTE)" in fragment
    assert "<html" not in fragment and "Sent again" not in fragment
    assert Delivery.objects.count() == 2

    without_htmx = client.post(path)
    assert without_htmx.status_code == 429 and "E31_WEBHOOK_REDELIVERIES_PER_MINUTE" in without_htmx.content.decode()
