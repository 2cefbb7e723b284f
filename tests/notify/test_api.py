"""GET/PUT /api/v1/notifications/: a person's own mail choices, every field checked."""

import pytest
from rest_framework.test import APIClient

from notify.models import DEFAULT_EMAIL_ON, Preference
from tests.conftest import api_client_for

URL = "/api/v1/notifications/"
GOOD = {"email_on": ["failed", "timed_out"], "digest": False, "digest_hour": 6}


@pytest.fixture
def addressed(member):
    member.email = "alice@e31.example"
    member.save(update_fields=["email"])
    return member


def test_defaults_before_any_choice(api, addressed, mail_off):
    response = api.get(URL)

    assert response.status_code == 200
    assert response.json() == {
        "email_on": DEFAULT_EMAIL_ON, "digest": True, "digest_hour": 7, "email": "alice@e31.example", "mail_on": False,
    }  # fmt: skip
    assert "succeeded" not in response.json()["email_on"]


def test_mail_on_says_an_smtp_server_is_set(api, mail_on):
    assert api.get(URL).json()["mail_on"] is True


def test_put_replaces_the_choices(api, addressed, member):
    response = api.put(URL, GOOD, format="json")

    assert response.status_code == 200
    assert response.json() == {**GOOD, "email": "alice@e31.example", "mail_on": False}
    saved = Preference.objects.get(user=member)
    assert (saved.email_on, saved.digest, saved.digest_hour) == (["failed", "timed_out"], False, 6)
    assert api.get(URL).json()["email_on"] == ["failed", "timed_out"]


def test_put_keeps_each_outcome_once_and_takes_none(api, member):
    assert api.put(URL, {**GOOD, "email_on": ["failed", "failed"]}, format="json").json()["email_on"] == ["failed"]
    assert api.put(URL, {**GOOD, "email_on": []}, format="json").json()["email_on"] == []


def test_read_only_fields_sent_back_are_ignored(api, addressed):
    shown = api.get(URL).json()

    response = api.put(
        URL, {**shown, "digest_hour": 9, "email": "mallory@evil.example", "mail_on": True}, format="json"
    )

    assert response.status_code == 200
    assert response.json()["email"] == "alice@e31.example"
    addressed.refresh_from_db()
    assert addressed.email == "alice@e31.example"


@pytest.mark.parametrize(
    "change, field",
    [
        ({"email_on": ["exploded"]}, "email_on"),
        ({"email_on": "failed"}, "email_on"),
        ({"email_on": None}, "email_on"),
        ({"email_on": [["failed"]]}, "email_on"),
        ({"digest": "maybe"}, "digest"),
        ({"digest": None}, "digest"),
        ({"digest_hour": 24}, "digest_hour"),
        ({"digest_hour": -1}, "digest_hour"),
        ({"digest_hour": "seven"}, "digest_hour"),
        ({"digest_hour": 7.5}, "digest_hour"),
        ({"digest_hour": True}, "digest_hour"),
        ({"digset": True}, "digset"),
    ],
)
def test_bad_values_are_400_naming_the_field(api, member, change, field):
    response = api.put(URL, {**GOOD, **change}, format="json")

    assert response.status_code == 400, response.json()
    assert field in response.json()
    assert not Preference.objects.filter(user=member).exists()


def test_an_unknown_field_is_refused_by_name(api):
    response = api.put(URL, {**GOOD, "email_on_success": True}, format="json")

    assert response.status_code == 400
    assert response.json() == {"email_on_success": ["Unknown field."]}


@pytest.mark.parametrize("missing", ["email_on", "digest", "digest_hour"])
def test_a_put_names_every_field(api, missing):
    body = {k: v for k, v in GOOD.items() if k != missing}

    response = api.put(URL, body, format="json")

    assert response.status_code == 400
    assert response.json() == {missing: ["This field is required."]}


@pytest.mark.parametrize("body", [[], "x", 7])
def test_a_body_that_is_not_an_object_is_400(api, body):
    response = api.put(URL, body, format="json")

    assert response.status_code == 400
    assert response.json() == {
        "non_field_errors": [f"Invalid data. Expected a dictionary, but got {type(body).__name__}."]
    }
    assert not Preference.objects.exists()


def test_a_body_that_is_not_json_is_400(api):
    response = api.generic("PUT", URL, b"{not json", content_type="application/json")

    assert response.status_code == 400
    assert response.json()["detail"].startswith("JSON parse error - ")
    assert not Preference.objects.exists()


def test_choices_are_each_persons_own(api, member, teammate, outsider):
    api.put(URL, GOOD, format="json")
    theirs = api_client_for(teammate)

    assert theirs.get(URL).json()["email_on"] == DEFAULT_EMAIL_ON
    theirs.put(URL, {**GOOD, "email_on": ["succeeded"], "digest_hour": 23}, format="json")

    mine = api.get(URL).json()
    assert (mine["email_on"], mine["digest_hour"]) == (["failed", "timed_out"], 6)
    assert Preference.objects.get(user=teammate).email_on == ["succeeded"]


def test_signed_out_is_401(db):
    assert APIClient().get(URL).status_code == 401
    assert APIClient().put(URL, GOOD, format="json").status_code == 401


@pytest.mark.parametrize("method", ["post", "patch", "delete"])
def test_other_methods_are_405(api, method):
    assert getattr(api, method)(URL, GOOD, format="json").status_code == 405
