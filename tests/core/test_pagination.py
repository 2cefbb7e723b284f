"""The API's pages: a count that stops at COUNT_CAP, so no page scans every row of a long list."""

import pytest
from rest_framework.pagination import PageNumberPagination

from core import pagination
from tests.factories import submit_job


@pytest.fixture
def five_jobs(member, team, monkeypatch):
    monkeypatch.setattr(pagination, "COUNT_CAP", 3)
    monkeypatch.setattr(PageNumberPagination, "page_size", 2)
    return [submit_job(member, team) for _ in range(5)]


def test_the_count_stops_at_the_cap(api, five_jobs):
    body = api.get("/api/v1/jobs/").json()

    assert body["count"] == 3 and len(body["results"]) == 2 and body["next"]


def test_the_pages_end_at_the_cap(api, five_jobs):
    assert len(api.get("/api/v1/jobs/", {"page": 2}).json()["results"]) == 1
    assert api.get("/api/v1/jobs/", {"page": 3}).status_code == 404


def test_under_the_cap_the_count_is_exact(api, member, team, monkeypatch):
    monkeypatch.setattr(pagination, "COUNT_CAP", 10)
    for _ in range(4):
        submit_job(member, team)

    assert api.get("/api/v1/jobs/").json()["count"] == 4
