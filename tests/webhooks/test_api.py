"""/api/v1/webhooks/: made (the secret shown once), listed, changed, deleted; their delivery logs and
redeliver; only URLs the allow list lets through, after DNS resolution."""

import pytest
from django.utils import timezone

from tests.conftest import api_client_for
from tests.factories import TeamFactory, UserFactory, member_of, webhook_of
from webhooks.delivery import enqueue
from webhooks.models import Delivery, Webhook

WEBHOOKS = "/api/v1/webhooks/"
HOOK = "http://127.0.0.1:19009/hook"

pytestmark = pytest.mark.usefixtures("webhooks_on")


def test_a_new_webhook_answers_201_with_its_secret_once(api, member, team):
    response = api.post(WEBHOOKS, {"url": HOOK, "events": ["job.released", "budget.warning"]}, format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    webhook = Webhook.objects.get(pk=body["id"])
    assert body["secret"] == webhook.secret and len(body["secret"]) > 30
    assert (body["team"], body["url"], body["events"], body["created_by"]) == (
        "red", HOOK, ["job.released", "budget.warning"], "alice",
    )  # fmt: skip
    assert "secret" not in api.get(f"{WEBHOOKS}{webhook.pk}/").json()
    assert webhook.secret not in api.get(WEBHOOKS).content.decode()


def test_a_person_in_no_team_is_told_so(db):
    loner = api_client_for(UserFactory(username="lone"))

    response = loner.post(WEBHOOKS, {"url": HOOK, "events": ["job.released"]}, format="json")

    assert (response.status_code, response.json()) == (400, {"team": ["You are not in any team."]})


def test_only_http_and_https_urls_are_taken(api, member):
    for url in ("ftp://127.0.0.1/hook", "file:///etc/passwd", "gopher://127.0.0.1/"):
        response = api.post(WEBHOOKS, {"url": url, "events": ["job.released"]}, format="json")
        assert response.status_code == 400 and "url" in response.json(), url
    assert not Webhook.objects.exists()


def test_a_host_the_allow_list_does_not_name_is_refused(api, member):
    response = api.post(WEBHOOKS, {"url": "http://10.1.2.3/hook", "events": ["job.released"]}, format="json")

    assert response.status_code == 400
    assert "not one webhooks may reach" in response.json()["url"][0]


def test_a_name_resolving_to_loopback_is_refused_when_only_another_network_is_allowed(api, member, settings):
    settings.E31_WEBHOOK_ALLOWED_HOSTS = ["10.8.0.0/16"]

    response = api.post(WEBHOOKS, {"url": "http://localhost:8080/hook", "events": ["job.released"]}, format="json")

    assert response.status_code == 400
    assert "127.0.0.1" in response.json()["url"][0]  # judged by the address it resolves to


def test_a_name_resolving_into_an_allowed_network_is_taken(api, member, settings):
    settings.E31_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.0/8:8080"]

    response = api.post(WEBHOOKS, {"url": "http://localhost:8080/hook", "events": ["job.released"]}, format="json")

    assert response.status_code == 201, response.content
    assert (response.json()["url"], response.json()["events"]) == ("http://localhost:8080/hook", ["job.released"])
    assert Webhook.objects.get().url == "http://localhost:8080/hook"


def test_an_allowed_hostname_is_matched_exactly(api, member, settings):
    settings.E31_WEBHOOK_ALLOWED_HOSTS = ["localhost:8080"]
    ok = api.post(WEBHOOKS, {"url": "http://localhost:8080/", "events": ["job.released"]}, format="json")
    by_address = api.post(WEBHOOKS, {"url": "http://127.0.0.1:8080/", "events": ["job.released"]}, format="json")

    assert ok.status_code == 201 and by_address.status_code == 400


def test_webhooks_off_is_a_400_saying_so(api, member, settings):
    settings.E31_WEBHOOK_ALLOWED_HOSTS = []

    response = api.post(WEBHOOKS, {"url": HOOK, "events": ["job.released"]}, format="json")

    assert response.status_code == 400
    assert "Webhooks are off" in response.json()["non_field_errors"][0]


def test_events_must_be_among_the_five(api, member):
    unknown = api.post(WEBHOOKS, {"url": HOOK, "events": ["job.started"]}, format="json")
    none = api.post(WEBHOOKS, {"url": HOOK, "events": []}, format="json")

    assert unknown.status_code == 400 and "events" in unknown.json()
    assert none.status_code == 400 and "events" in none.json()


def test_a_member_of_several_teams_names_the_team(api, member, other_team):
    member_of(other_team, "alice")

    unnamed = api.post(WEBHOOKS, {"url": HOOK, "events": ["job.released"]}, format="json")
    named = api.post(WEBHOOKS, {"url": HOOK, "events": ["job.released"], "team": "blue"}, format="json")

    assert unnamed.status_code == 400 and "several" in unnamed.json()["team"][0]
    assert named.status_code == 201 and named.json()["team"] == "blue"


def test_another_teams_slug_is_refused(api, member, other_team):
    response = api.post(WEBHOOKS, {"url": HOOK, "events": ["job.released"], "team": "blue"}, format="json")

    assert response.status_code == 400 and "team" in response.json()


def test_the_list_shows_my_teams_webhooks_only(
    api, member, teammate, outsider, other_team, django_assert_max_num_queries
):
    mine, _ = webhook_of(member.membership_set.get().team, teammate, HOOK)
    webhook_of(other_team, outsider, HOOK)

    with django_assert_max_num_queries(8):
        body = api.get(WEBHOOKS).json()

    assert [w["id"] for w in body["results"]] == [mine.pk]
    assert body["results"][0]["created_by"] == "bob"


def test_another_teams_webhook_answers_404(outsider_api, member, team):
    webhook, _ = webhook_of(team, member, HOOK)
    delivery = enqueue(team.pk, "job.released", {}, now=timezone.now())[0]

    for method, path in [
        ("get", f"{WEBHOOKS}{webhook.pk}/"),
        ("patch", f"{WEBHOOKS}{webhook.pk}/"),
        ("delete", f"{WEBHOOKS}{webhook.pk}/"),
        ("get", f"{WEBHOOKS}{webhook.pk}/deliveries/"),
        ("post", f"{WEBHOOKS}{webhook.pk}/deliveries/{delivery.delivery_id}/redeliver/"),
    ]:
        assert getattr(outsider_api, method)(path, {}, format="json").status_code == 404, (method, path)
    assert Webhook.objects.filter(pk=webhook.pk).exists() and Delivery.objects.count() == 1


def test_patch_changes_the_url_events_and_active_checked_as_at_creation(api, member, team):
    webhook, secret = webhook_of(team, member, HOOK)

    changed = api.patch(
        f"{WEBHOOKS}{webhook.pk}/", {"events": ["array.released"], "active": False}, format="json"
    ).json()
    refused = api.patch(f"{WEBHOOKS}{webhook.pk}/", {"url": "http://10.0.0.1/"}, format="json")

    assert (changed["events"], changed["active"], changed["url"]) == (["array.released"], False, HOOK)
    assert "secret" not in changed
    assert refused.status_code == 400 and "url" in refused.json()
    webhook.refresh_from_db()
    assert webhook.url == HOOK and webhook.secret == secret


def test_put_is_not_allowed(api, member, team):
    webhook, _ = webhook_of(team, member, HOOK)

    assert api.put(f"{WEBHOOKS}{webhook.pk}/", {"url": HOOK, "events": ["job.released"]}).status_code == 405


def test_delete_removes_the_webhook_and_its_log(api, member, team):
    webhook, _ = webhook_of(team, member, HOOK)
    enqueue(team.pk, "job.released", {}, now=timezone.now())

    assert api.delete(f"{WEBHOOKS}{webhook.pk}/").status_code == 204
    assert not Webhook.objects.exists() and not Delivery.objects.exists()


def test_the_delivery_log_and_redeliver(api, member, team):
    webhook, _ = webhook_of(team, member, HOOK)
    first = enqueue(team.pk, "job.released", {"id": "x"}, now=timezone.now())[0]
    Delivery.objects.filter(pk=first.pk).update(
        status="failed", attempts=12, status_class="5xx", response_code=500, duration_ms=41
    )

    again = api.post(f"{WEBHOOKS}{webhook.pk}/deliveries/{first.delivery_id}/redeliver/")
    log = api.get(f"{WEBHOOKS}{webhook.pk}/deliveries/").json()["results"]

    assert again.status_code == 201
    assert again.json()["redelivery_of"] == str(first.delivery_id) and again.json()["status"] == "pending"
    shown = ["id", "event", "status", "status_class", "response_code", "duration_ms", "attempts"]
    assert [tuple(d[name] for name in shown) for d in log] == [
        (again.json()["id"], "job.released", "pending", "", None, None, 0),
        (str(first.delivery_id), "job.released", "failed", "5xx", 500, 41, 12),
    ]
    assert "last_error" not in log[0]
    assert Delivery.objects.get(delivery_id=again.json()["id"]).payload == {"id": "x"}


def test_redeliver_of_another_webhooks_delivery_is_404(api, member, team):
    webhook, _ = webhook_of(team, member, HOOK)
    other, _ = webhook_of(TeamFactory(slug="green"), member, HOOK)
    delivery = Delivery.objects.create(webhook=other, event="job.released", payload={}, created_at=timezone.now())

    response = api.post(f"{WEBHOOKS}{webhook.pk}/deliveries/{delivery.delivery_id}/redeliver/")

    assert response.status_code == 404


def test_signed_out_is_401(client):
    assert client.get(WEBHOOKS).status_code == 401


def test_the_delivery_log_is_read_in_a_fixed_number_of_queries(api, member, team, django_assert_max_num_queries):
    webhook, _ = webhook_of(team, member, HOOK)
    for _ in range(5):
        first = enqueue(team.pk, "job.released", {}, now=timezone.now())[0]
        Delivery.objects.create(
            webhook=webhook, event="job.released", payload={}, created_at=timezone.now(), redelivery_of=first
        )

    with django_assert_max_num_queries(8):
        body = api.get(f"{WEBHOOKS}{webhook.pk}/deliveries/").json()

    assert body["count"] == 10
