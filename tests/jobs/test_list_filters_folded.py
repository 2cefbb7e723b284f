"""The job list's filter folds once it found jobs (their first row on a phone's first screen), saying how many
filters apply; it stays open when it found none or a value is bad, to be mended."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Outcome
from tests.factories import ended_job

FILTER = re.compile(r"<details class=\"card\"( open)?>\s*<summary>([^<]*)</summary>")


@pytest.fixture
def failed(member, team, local_node):
    return ended_job(member, team, outcome=Outcome.FAILED, at=timezone.now() - timedelta(hours=1), name="etl")


def filter_of(client, query: str) -> tuple[bool, str]:
    found = FILTER.search(client.get(f"/jobs/?{query}").content.decode())
    assert found is not None
    return bool(found.group(1)), found.group(2)


def test_a_filter_that_found_jobs_is_folded_and_says_what_applies(client, member, failed):
    client.force_login(member)

    assert filter_of(client, "outcome=failed&q=etl") == (False, "Filter · 2 applied")


def test_a_filter_that_found_nothing_stays_open(client, member, failed):
    client.force_login(member)

    assert filter_of(client, "outcome=succeeded") == (True, "Filter · 1 applied")


def test_a_bad_filter_stays_open_and_no_filter_is_folded(client, member, failed):
    client.force_login(member)

    assert filter_of(client, "since=yesterday-ish")[0] is True
    assert filter_of(client, "") == (False, "Filter")


def test_the_lists_moments_are_typed_as_a_day_and_a_time_in_the_viewers_zone(client, member, paris, failed):
    client.force_login(member)

    page = client.get("/jobs/?since=2030-03-11T18:00").content.decode()

    # The picker shows the moment it read, to the minute, as the /usage/ page's do.
    assert '<input type="datetime-local" name="since" value="2030-03-11T18:00"' in page
    assert '<input type="datetime-local" name="until"' in page
    assert page.count("A day and a time, in Europe/Paris.") == 2
