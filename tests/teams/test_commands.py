"""Teams and people as an operator scripts them: create_team, add_member, create_token; teams_of."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from teams.access import is_operator, teams_of
from teams.models import Membership, Team

User = get_user_model()


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip()


# --- create_team --------------------------------------------------------------------------------


def test_create_team_makes_a_team_once(db):
    assert run("create_team", "green", "--name", "Green team") == "created: team green"
    assert run("create_team", "green", "--name", "Another name") == "exists: team green"

    assert Team.objects.get().name == "Green team"


def test_create_team_names_the_team_after_its_slug_by_default(db):
    run("create_team", "night-shift")

    assert Team.objects.get(slug="night-shift").name == "night-shift"


@pytest.mark.parametrize("slug", ["Green Team", "green/blue", "é", "", "x" * 51])
def test_create_team_refuses_a_bad_slug(db, slug):
    with pytest.raises(CommandError, match="slug"):
        run("create_team", slug)

    assert not Team.objects.exists()


# --- add_member ---------------------------------------------------------------------------------


def test_add_member_creates_a_person_who_can_sign_in(team):
    assert run("add_member", "carol", "--team", "red", "--password", "a long pass phrase") == "carol is a member of red"

    carol = User.objects.get(username="carol")
    assert carol.check_password("a long pass phrase")
    assert not carol.is_staff
    assert list(teams_of(carol)) == [team]


def test_add_member_without_a_password_makes_a_person_who_cannot_sign_in_yet(team):
    run("add_member", "carol", "--team", "red")

    carol = User.objects.get(username="carol")
    assert not carol.has_usable_password()
    response = Client().post("/login/", {"username": "carol", "password": ""})
    assert response.status_code == 200 and "_auth_user_id" not in response.client.session


def test_add_member_adds_an_existing_person_to_another_team_and_keeps_their_password(member, team, other_team):
    run("add_member", "alice", "--team", "blue")
    run("add_member", "alice", "--team", "blue")  # twice is once

    member.refresh_from_db()
    assert member.check_password("pw-for-tests-1")
    assert set(teams_of(member)) == {team, other_team}
    assert Membership.objects.filter(user=member).count() == 2


def test_add_member_makes_an_operator(team):
    assert run("add_member", "olga", "--team", "red", "--operator") == "olga is an operator of red"

    assert is_operator(User.objects.get(username="olga"))


def test_add_member_sets_the_address_mail_goes_to_and_refuses_a_bad_one(team):
    run("add_member", "carol", "--team", "red", "--email", "carol@localhost")
    assert User.objects.get(username="carol").email == "carol@localhost"

    with pytest.raises(CommandError, match="not an e-mail address"):
        run("add_member", "dave", "--team", "red", "--email", "dave at home")
    assert not User.objects.filter(username="dave").exists()


def test_add_member_refuses_an_unknown_team(db):
    with pytest.raises(CommandError, match="no team 'nowhere'"):
        run("add_member", "carol", "--team", "nowhere")

    assert not User.objects.filter(username="carol").exists()


@pytest.mark.parametrize("username", ["carol smith", "carol/1", ""])
def test_add_member_refuses_a_bad_username(team, username):
    with pytest.raises(CommandError, match="username"):
        run("add_member", username, "--team", "red")

    assert not Membership.objects.exists()


# --- create_token -------------------------------------------------------------------------------


def test_create_token_prints_a_token_that_authenticates_against_the_api(member):
    token = run("create_token", "alice")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")

    assert client.get("/api/v1/jobs/").status_code == 200
    assert client.get("/api/v1/jobs/").wsgi_request.user == member


def test_create_token_makes_a_new_token_each_time_and_the_earlier_ones_keep_working(member):
    first, second = run("create_token", "alice"), run("create_token", "alice")

    assert first != second
    for token in (first, second):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        assert client.get("/api/v1/jobs/").status_code == 200


def test_a_wrong_token_does_not_authenticate(member):
    run("create_token", "alice")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token 0123456789abcdef0123456789abcdef01234567")

    response = client.get("/api/v1/jobs/")
    assert response.status_code in (401, 403)
    assert response.json() == {"detail": "Invalid token."}


def test_create_token_refuses_an_unknown_user(db):
    with pytest.raises(CommandError, match="no user 'nobody'"):
        run("create_token", "nobody")


# --- teams_of -----------------------------------------------------------------------------------


def test_teams_of_is_the_teams_a_person_belongs_to(member, outsider, team, other_team):
    assert list(teams_of(member)) == [team]
    assert list(teams_of(outsider)) == [other_team]


def test_an_operator_belongs_only_to_their_own_teams(operator, team, other_team):
    assert [t.slug for t in teams_of(operator)] == ["ops"]
    assert is_operator(operator)


def test_an_anonymous_visitor_has_no_teams(team):
    assert list(teams_of(AnonymousUser())) == []
    assert not is_operator(AnonymousUser())
