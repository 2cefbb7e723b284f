"""/account/webhooks/: the teams' webhooks, one added (its secret shown once), deleted; each one's delivery
log with redeliver; the page says plainly when webhooks are off."""

import pytest
from django.utils import timezone

from tests.factories import webhook_of
from webhooks.delivery import enqueue
from webhooks.models import Delivery, Webhook

PAGE = "/account/webhooks/"
HTMX = {"HTTP_HX_REQUEST": "true"}
HOOK = "http://127.0.0.1:19009/hook"


@pytest.mark.usefixtures("webhooks_on")
def test_the_page_lists_my_teams_webhooks_without_their_secrets(client, member, teammate, outsider, team, other_team):
    mine, secret = webhook_of(team, teammate, HOOK, events=["job.released", "budget.warning"])
    webhook_of(other_team, outsider, "http://127.0.0.1:19010/theirs")
    client.force_login(member)

    page = client.get(PAGE).content.decode()

    assert HOOK in page and "job.released, budget.warning" in page and "by bob" in page
    assert secret not in page and "/theirs" not in page
    assert "Webhooks are off" not in page


@pytest.mark.usefixtures("webhooks_on")
def test_adding_a_webhook_shows_its_secret_once(client, member, team):
    client.force_login(member)

    fragment = client.post(PAGE, {"url": HOOK, "events": ["job.released"]}, **HTMX).content.decode()

    webhook = Webhook.objects.get()
    assert (webhook.team, webhook.url, webhook.events, webhook.created_by) == (team, HOOK, ["job.released"], member)
    assert f'<code class="key">{webhook.secret}</code>' in fragment and "<html" not in fragment
    assert webhook.secret not in client.get(PAGE).content.decode()


@pytest.mark.usefixtures("webhooks_on")
def test_a_url_not_allowed_is_refused_with_the_field_named(client, member):
    client.force_login(member)

    response = client.post(PAGE, {"url": "http://10.9.9.9/", "events": ["job.released"]}, **HTMX)

    page = response.content.decode()
    assert "field-url invalid" in page and "not one webhooks may reach" in page
    assert not Webhook.objects.exists()


def test_the_page_says_when_webhooks_are_off_and_adds_none(client, member, settings):
    settings.E31_WEBHOOK_ALLOWED_HOSTS = []
    client.force_login(member)

    page = client.get(PAGE).content.decode()
    client.post(PAGE, {"url": HOOK, "events": ["job.released"]})

    assert "Webhooks are off on this site" in page and "new-webhook-form" not in page
    assert not Webhook.objects.exists()


@pytest.mark.usefixtures("webhooks_on")
def test_delete(client, member, team):
    webhook, _ = webhook_of(team, member, HOOK)
    client.force_login(member)

    fragment = client.post(f"{PAGE}{webhook.pk}/delete/", **HTMX).content.decode()

    assert "Webhook deleted" in fragment and not Webhook.objects.exists()


@pytest.mark.usefixtures("webhooks_on")
def test_the_delivery_log_and_its_redeliver_button(client, member, team):
    webhook, _ = webhook_of(team, member, HOOK)
    first = enqueue(team.pk, "job.released", {"id": "x"}, now=timezone.now())[0]
    Delivery.objects.filter(pk=first.pk).update(
        status="failed", status_class="5xx", response_code=502, duration_ms=1234, attempts=12
    )
    client.force_login(member)

    log = client.get(f"{PAGE}{webhook.pk}/deliveries/", **HTMX).content.decode()
    after = client.post(f"{PAGE}{webhook.pk}/deliveries/{first.delivery_id}/redeliver/", **HTMX).content.decode()

    assert "job.released" in log and "failed" in log and "5xx (502)" in log and "1234 ms" in log
    assert "Redeliver" in log
    assert "<html" not in log and "502" in client.get(f"{PAGE}{webhook.pk}/deliveries/").content.decode()
    again = Delivery.objects.exclude(pk=first.pk).get()
    assert again.redelivery_of == first and again.status == "pending"
    assert f"Sent again as delivery <code>{again.delivery_id}</code>" in after


@pytest.mark.usefixtures("webhooks_on")
def test_another_teams_webhook_is_404_on_every_part(client, outsider, member, team):
    webhook, _ = webhook_of(team, member, HOOK)
    delivery = enqueue(team.pk, "job.released", {}, now=timezone.now())[0]
    client.force_login(outsider)

    assert client.get(f"{PAGE}{webhook.pk}/deliveries/").status_code == 404
    assert client.post(f"{PAGE}{webhook.pk}/delete/").status_code == 404
    assert client.post(f"{PAGE}{webhook.pk}/deliveries/{delivery.delivery_id}/redeliver/").status_code == 404
    assert Webhook.objects.exists() and Delivery.objects.count() == 1


def test_wrong_methods_and_signed_out(client, member):
    assert client.get(PAGE).status_code == 302  # to the login page
    client.force_login(member)
    assert client.put(PAGE).status_code == 405
    assert client.get(f"{PAGE}1/delete/").status_code == 405
