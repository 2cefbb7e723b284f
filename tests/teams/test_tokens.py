"""API tokens: kept as digests only, several per person, revoked by deleting them, and failed ones throttled."""

import hashlib
import importlib
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.db import connection
from rest_framework.test import APIClient

from teams.models import ApiToken
from teams.people import token_for

JOBS = "/api/v1/jobs/"


def client_with(key: str, **extra) -> APIClient:
    client = APIClient(**extra)
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_a_token_is_stored_as_its_sha256_and_never_as_the_key(member):
    key = token_for(member)

    token = ApiToken.objects.get(user=member)
    assert token.digest == hashlib.sha256(key.encode()).hexdigest()
    stored = [str(value) for value in ApiToken.objects.values_list().get()]
    assert not any(key in value for value in stored)
    assert key.startswith(token.prefix) and len(token.prefix) < len(key) // 4


def test_a_token_authenticates_as_its_owner(member):
    response = client_with(token_for(member)).get(JOBS)

    assert response.status_code == 200 and response.wsgi_request.user == member


def test_a_deleted_token_no_longer_authenticates(member):
    kept, revoked = token_for(member), token_for(member)
    ApiToken.objects.get(prefix=revoked[:8]).delete()

    assert client_with(kept).get(JOBS).status_code == 200
    response = client_with(revoked).get(JOBS)
    assert response.status_code == 401 and response.json() == {"detail": "Invalid token."}


def test_the_token_of_an_inactive_person_is_refused(member):
    key = token_for(member)
    member.is_active = False
    member.save(update_fields=["is_active"])

    assert client_with(key).get(JOBS).status_code == 401


def test_a_request_without_a_token_is_challenged_for_one(db):
    response = APIClient().get(JOBS)

    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"


# --- failed tokens are throttled per address ---------------------------------------------------------------


@pytest.fixture
def three_failures_an_hour(settings):
    settings.E31_API_THROTTLE_RATES = {**settings.E31_API_THROTTLE_RATES, "failed_token": "3/hour"}


def test_an_address_that_keeps_sending_wrong_tokens_is_throttled(member, three_failures_an_hour):
    guesser = client_with("wrong-guess")

    assert [guesser.get(JOBS).status_code for _ in range(3)] == [401, 401, 401]
    response = guesser.get(JOBS)

    assert response.status_code == 429
    assert 3500 <= int(response["Retry-After"]) <= 3600
    # Past the limit no key is even looked up from that address, so guessing there learns nothing.
    assert client_with(token_for(member)).get(JOBS).status_code == 429


def test_wrong_tokens_from_one_address_do_not_throttle_another(member, three_failures_an_hour):
    guesser = client_with("wrong-guess", REMOTE_ADDR="10.0.0.66")
    for _ in range(4):
        guesser.get(JOBS)

    assert guesser.get(JOBS).status_code == 429
    assert client_with(token_for(member), REMOTE_ADDR="10.0.0.7").get(JOBS).status_code == 200


def test_a_forged_forwarded_for_header_does_not_escape_the_throttle(db, three_failures_an_hour):
    codes = [client_with("wrong-guess", HTTP_X_FORWARDED_FOR=f"192.0.2.{n}").get(JOBS).status_code for n in range(5)]

    assert codes == [401, 401, 401, 429, 429]


def test_good_tokens_are_not_counted_as_failures(member, three_failures_an_hour):
    client = client_with(token_for(member))

    assert {client.get(JOBS).status_code for _ in range(5)} == {200}


# --- the migration from DRF's plain tokens --------------------------------------------------------------


def test_the_migration_keeps_drfs_plain_tokens_working_as_digests_and_wipes_them(member):
    migration = importlib.import_module("teams.migrations.0002_api_tokens_hashed")
    plain = "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cursor:  # DRF authtoken's table, as an older installation has it
        cursor.execute(
            'CREATE TABLE authtoken_token ("key" varchar(40) PRIMARY KEY, user_id integer, created timestamptz)'
        )
        cursor.execute("INSERT INTO authtoken_token VALUES (%s, %s, now())", [plain, member.pk])

    migration.hash_plain_tokens(apps, SimpleNamespace(connection=connection))

    assert client_with(plain).get(JOBS).status_code == 200
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM authtoken_token")
        assert cursor.fetchone()[0] == 0
    assert ApiToken.objects.get().digest == hashlib.sha256(plain.encode()).hexdigest()
