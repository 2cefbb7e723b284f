"""Moments on the pages are in the viewer's team zone, named once in the footer; the API keeps UTC."""

from datetime import UTC, datetime, timedelta

import pytest

from jobs.models import Outcome
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
