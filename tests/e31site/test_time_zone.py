"""Moments on the pages are in the viewer's team zone, named once in the footer; the API keeps UTC. The zone is kept
in the session and checked against one version in the cache, so a team's new zone shows on its members' next page."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache
from django.test import Client
from redis.exceptions import ConnectionError as RedisConnectionError

from jobs.models import Outcome
from teams.access import SESSION_ZONE, ZONES_VERSION, page_zone, zones_changed
from teams.models import Team
from teams.people import add_member, create_team
from tests.factories import ended_job

RELEASED = datetime(2026, 12, 6, 19, 8, tzinfo=UTC)


@pytest.fixture
def paris_job(member, team, local_node):
    team.time_zone = "Europe/Paris"
    team.save(update_fields=["time_zone"])
    return ended_job(member, team, outcome=Outcome.SUCCEEDED, at=RELEASED, ran=timedelta(minutes=1), name="nightly")


def test_a_page_shows_moments_in_the_team_zone_and_names_it_once(client, member, paris_job):
    client.force_login(member)

    page = client.get(f"/jobs/{paris_job.pk}/").content.decode()

    assert "2026-12-06 20:08" in page and "19:08" not in page
    assert page.count("Times in Europe/Paris") == 1


def test_the_api_answers_in_utc_whatever_the_team_zone(api, paris_job):
    job = api.get(f"/api/v1/jobs/{paris_job.pk}/").json()

    assert datetime.fromisoformat(job["released_at"]).utcoffset() == timedelta(0)
    assert datetime.fromisoformat(job["released_at"]) == RELEASED


def test_a_signed_out_page_names_no_zone(client, db):
    assert "Times in" not in client.get("/login/").content.decode()


def test_the_zone_is_kept_from_sign_in_so_a_page_pays_no_query_for_it(client, member, paris_job):
    client.force_login(member)
    assert client.session["zone"] == "Europe/Paris"


def test_an_older_session_without_a_zone_finds_it_again(client, member, paris_job):
    client.force_login(member)
    session = client.session
    del session["zone"]
    session.save()

    assert "Times in Europe/Paris" in client.get("/jobs/").content.decode()
    assert client.session["zone"] == "Europe/Paris"


def test_a_teams_new_zone_shows_on_its_members_next_page_without_a_new_sign_in(
    client, member, team, operator, paris_job, django_capture_on_commit_callbacks
):
    client.force_login(member)
    assert "Times in Europe/Paris" in client.get("/jobs/").content.decode()
    admin = Client()
    admin.force_login(operator)

    with django_capture_on_commit_callbacks(execute=True):
        saved = admin.post(f"/admin/teams/team/{team.pk}/change/", {
            "slug": team.slug, "name": team.name, "time_zone": "America/New_York", "pin_days": 0,
            "membership_set-TOTAL_FORMS": 0, "membership_set-INITIAL_FORMS": 0,
        })  # fmt: skip

    assert saved.status_code == 302
    page = client.get(f"/jobs/{paris_job.pk}/").content.decode()
    assert "Times in America/New_York" in page and "Europe/Paris" not in page
    assert "2026-12-06 14:08" in page  # 19:08 UTC


def test_a_member_who_joins_an_earlier_team_reads_its_zone_on_the_next_page(
    client, member, paris_job, django_capture_on_commit_callbacks
):
    client.force_login(member)
    assert "Times in Europe/Paris" in client.get("/jobs/").content.decode()
    amber = create_team("amber")[0]  # before "red" by slug: the member's first team now
    Team.objects.filter(pk=amber.pk).update(time_zone="Asia/Tokyo")

    with django_capture_on_commit_callbacks(execute=True):
        add_member(member.username, team=amber)

    assert "Times in Asia/Tokyo" in client.get("/jobs/").content.decode()


def test_the_kept_zone_costs_a_page_no_query_until_the_zones_change(
    client, rf, member, paris_job, django_assert_num_queries, django_capture_on_commit_callbacks
):
    client.force_login(member)
    request = rf.get("/jobs/")
    request.user, request.session = member, client.session
    assert request.session[SESSION_ZONE] == "Europe/Paris"  # the session read before the count

    with django_assert_num_queries(0):
        assert str(page_zone(request)) == "Europe/Paris"
    with django_capture_on_commit_callbacks(execute=True):
        zones_changed()
    with django_assert_num_queries(1):  # the person's first team, once
        assert str(page_zone(request)) == "Europe/Paris"
    with django_assert_num_queries(0):
        assert str(page_zone(request)) == "Europe/Paris"


def test_with_the_cache_away_a_page_keeps_the_zone_of_its_session(client, member, team, paris_job, monkeypatch):
    client.force_login(member)
    Team.objects.filter(pk=team.pk).update(time_zone="Asia/Tokyo")  # not said to the cache: only the session knows

    def away(*args, **kwargs):
        raise RedisConnectionError("Connection refused")

    monkeypatch.setattr(cache, "get_or_set", away)

    assert "Times in Europe/Paris" in client.get("/jobs/").content.decode()


def test_renaming_a_team_in_the_admin_finds_no_zone_again(
    member, team, operator, paris_job, django_capture_on_commit_callbacks
):
    admin = Client()
    admin.force_login(operator)
    kept = cache.get_or_set(ZONES_VERSION, "before", timeout=None)

    with django_capture_on_commit_callbacks(execute=True):
        saved = admin.post(f"/admin/teams/team/{team.pk}/change/", {
            "slug": team.slug, "name": "Red, renamed", "time_zone": "Europe/Paris", "pin_days": 0,
            "membership_set-TOTAL_FORMS": 0, "membership_set-INITIAL_FORMS": 0,
        })  # fmt: skip

    assert saved.status_code == 302 and Team.objects.get(pk=team.pk).name == "Red, renamed"
    assert cache.get(ZONES_VERSION) == kept  # every session keeps its zone: no query for it
