"""API tokens: kept as digests only, several per person, revoked by deleting them; unknown ones lock out
their address and their prefix for a while, never a valid token."""

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


def test_a_token_sent_as_a_bearer_authenticates_as_its_owner(member):
    """What a client generated from the document sends by default: the same key, the same checks."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_for(member)}")

    response = client.get(JOBS)

    assert response.status_code == 200 and response.wsgi_request.user == member
    client.credentials(HTTP_AUTHORIZATION="Bearer wrong-guess")
    assert client.get(JOBS).json() == {"detail": "Invalid token."}


def test_the_document_states_both_ways_of_sending_a_token(db):
    document = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    schemes = document["components"]["securitySchemes"]
    assert schemes["bearerAuth"]["type"] == "http" and schemes["bearerAuth"]["scheme"] == "bearer"
    assert {"tokenAuth": []} in document["paths"][JOBS]["get"]["security"]
    assert {"bearerAuth": []} in document["paths"][JOBS]["get"]["security"]


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


# --- unknown tokens lock out their address and prefix, never a valid token --------------------------------


@pytest.fixture
def three_failures_then_five_minutes(settings):
    settings.E31_API_THROTTLE_RATES = {**settings.E31_API_THROTTLE_RATES, "failed_token": "3/hour"}
    settings.E31_API_FAILED_TOKEN_LOCKOUT_MIN = 5


def lock_out(address: str = "127.0.0.1", key: str = "wrong-guess") -> APIClient:
    """A client at `address` that sent unknown tokens until the address is locked out."""
    guesser = client_with(key, REMOTE_ADDR=address)
    assert [guesser.get(JOBS).status_code for _ in range(3)] == [401, 401, 401]
    return guesser


def test_an_address_that_keeps_sending_unknown_tokens_is_locked_out_for_the_configured_minutes(
    db, three_failures_then_five_minutes
):
    response = lock_out().get(JOBS)

    assert response.status_code == 429
    body = response.json()
    assert body["lockout_minutes"] == 5 and "refused for 5 minutes" in body["detail"]
    assert 4 * 60 < int(response["Retry-After"]) <= 5 * 60
    assert "ends in 5 minutes" in body["detail"]  # the seconds left, said in whole minutes


def test_a_valid_token_from_the_address_of_a_locked_out_client_is_accepted(member, three_failures_then_five_minutes):
    bad = lock_out()
    good = client_with(token_for(member))  # the same REMOTE_ADDR: one office, one proxy, one host

    assert bad.get(JOBS).status_code == 429
    response = good.get(JOBS)
    assert response.status_code == 200 and response.wsgi_request.user == member
    assert bad.get(JOBS).status_code == 429  # the good client lifted nothing


def test_a_browser_session_from_a_locked_out_address_is_accepted(client, member, three_failures_then_five_minutes):
    lock_out()
    client.force_login(member)

    response = client.get(JOBS)
    assert response.status_code == 200 and response.wsgi_request.user == member


def test_requests_without_a_token_are_never_locked_out(db, three_failures_then_five_minutes):
    lock_out()

    assert APIClient().get("/api/schema/").status_code == 200
    assert APIClient().get(JOBS).status_code == 401  # asked for credentials, not throttled


def test_unknown_tokens_from_one_address_do_not_lock_out_another(db, three_failures_then_five_minutes):
    guesser = lock_out(address="10.0.0.66")

    assert guesser.get(JOBS).status_code == 429
    assert client_with("another-typo", REMOTE_ADDR="10.0.0.7").get(JOBS).status_code == 401


def test_one_key_guessed_from_many_addresses_locks_out_its_prefix_but_never_the_key(
    member, three_failures_then_five_minutes
):
    key = token_for(member)
    guesses = [client_with(key[:8] + f"guess{n}", REMOTE_ADDR=f"10.0.1.{n}").get(JOBS) for n in range(4)]

    assert [response.status_code for response in guesses] == [401, 401, 401, 429]
    assert client_with("elsewhere-typo", REMOTE_ADDR="10.0.1.99").get(JOBS).status_code == 401
    assert client_with(key, REMOTE_ADDR="10.0.1.99").get(JOBS).status_code == 200


def test_a_forged_forwarded_for_header_does_not_escape_the_lockout(db, three_failures_then_five_minutes):
    codes = [client_with(f"guess{n}", HTTP_X_FORWARDED_FOR=f"192.0.2.{n}").get(JOBS).status_code for n in range(5)]

    assert codes == [401, 401, 401, 429, 429]


def test_good_tokens_are_not_counted_as_failures(member, three_failures_then_five_minutes):
    client = client_with(token_for(member))

    assert {client.get(JOBS).status_code for _ in range(5)} == {200}
    assert client_with("one-typo").get(JOBS).status_code == 401


def test_a_malformed_header_is_not_a_guess_and_is_not_counted(db, three_failures_then_five_minutes):
    malformed = APIClient(HTTP_AUTHORIZATION="Token two words")

    assert {malformed.get(JOBS).status_code for _ in range(5)} == {401}
    assert client_with("one-typo").get(JOBS).status_code == 401


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
