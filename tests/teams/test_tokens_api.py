"""/api/v1/tokens/: a person makes, names, lists and revokes their own keys; operators revoke anyone's."""

import pytest
from rest_framework.test import APIClient

from teams.models import ApiToken
from teams.tokens import issue_token
from tests.conftest import api_client_for

TOKENS = "/api/v1/tokens/"


def client_with(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_a_new_token_shows_its_key_once_and_the_key_works(api, member):
    response = api.post(TOKENS, {"name": "nightly cron"}, format="json")

    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "nightly cron" and body["user"] == "alice" and body["key"].startswith(body["prefix"])
    assert client_with(body["key"]).get("/api/v1/jobs/").status_code == 200
    listed = api.get(TOKENS).json()["results"]
    assert "key" not in listed[0] and {t["name"] for t in listed} >= {"nightly cron"}
    assert api.get(f"{TOKENS}{body['id']}/").json() == {k: v for k, v in body.items() if k != "key"}


@pytest.mark.parametrize(
    ("body", "field"),
    [({}, "name"), ({"name": ""}, "name"), ({"name": "x" * 101}, "name")],
)
def test_a_token_needs_a_name_of_at_most_100_characters(api, body, field):
    response = api.post(TOKENS, body, format="json")

    assert response.status_code == 400 and field in response.json()
    assert ApiToken.objects.count() == 1  # the fixture's own


@pytest.mark.parametrize(
    ("name", "named"),
    [("\x1b[31mred", "U+001B"), ("cr\rover", "U+000D"), ("two\nlines", "U+000A"), ("\u202eesrever", "U+202E")],
)
def test_a_token_name_with_a_control_or_bidi_character_is_refused_naming_it(api, name, named):
    response = api.post(TOKENS, {"name": name}, format="json")

    assert response.status_code == 400 and named in response.json()["name"][0]
    assert ApiToken.objects.count() == 1  # the fixture's own


def test_the_list_shows_only_my_tokens(api, member, teammate):
    issue_token(teammate, name="bob's laptop")
    issue_token(member, name="ci")

    names = [t["name"] for t in api.get(TOKENS).json()["results"]]
    assert "ci" in names and "bob's laptop" not in names


def test_the_list_filters_by_name_and_refuses_bad_dates(api, member):
    issue_token(member, name="nightly cron")
    issue_token(member, name="notebook")

    assert [t["name"] for t in api.get(TOKENS, {"q": "cron"}).json()["results"]] == ["nightly cron"]
    response = api.get(TOKENS, {"since": "yesterday"})
    assert response.status_code == 400 and "since" in response.json()


def test_revoking_my_token_stops_its_key_at_once(api, member):
    token, key = issue_token(member, name="old")

    assert api.delete(f"{TOKENS}{token.pk}/").status_code == 204
    assert client_with(key).get("/api/v1/jobs/").status_code == 401
    assert not ApiToken.objects.filter(pk=token.pk).exists()


def test_someone_elses_token_is_404_to_a_member(api, outsider):
    token, key = issue_token(outsider, name="eve's")

    assert api.get(f"{TOKENS}{token.pk}/").status_code == 404
    assert api.delete(f"{TOKENS}{token.pk}/").status_code == 404
    assert client_with(key).get("/api/v1/jobs/").status_code == 200


def test_an_operator_sees_and_revokes_anyones_token(operator_api, outsider):
    token, key = issue_token(outsider, name="eve's")

    listed = operator_api.get(TOKENS, {"user": "eve"}).json()["results"]
    assert [t["name"] for t in listed] == ["eve's"]
    assert operator_api.delete(f"{TOKENS}{token.pk}/").status_code == 204
    assert client_with(key).get("/api/v1/jobs/").status_code == 401


def test_no_token_is_401(db):
    assert APIClient().get(TOKENS).status_code == 401
    assert APIClient().post(TOKENS, {"name": "x"}, format="json").status_code == 401


def test_a_token_cannot_be_changed(api, member):
    token, _ = issue_token(member, name="ci")

    assert api.put(f"{TOKENS}{token.pk}/", {"name": "renamed"}, format="json").status_code == 405
    assert api.patch(f"{TOKENS}{token.pk}/", {"name": "renamed"}, format="json").status_code == 405


def test_a_person_over_the_rate_gets_429_with_retry_after(settings, member):
    settings.E31_API_THROTTLE_RATES = {**settings.E31_API_THROTTLE_RATES, "user": "2/min"}
    api = api_client_for(member)

    assert [api.get(TOKENS).status_code for _ in range(2)] == [200, 200]
    response = api.post(TOKENS, {"name": "one more"}, format="json")
    assert response.status_code == 429 and int(response["Retry-After"]) > 0
