"""The job list's "last log line" column: an ended job's failure excerpt, one line of it, from the row itself."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Outcome
from tests.factories import ended_job


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


def test_a_failed_job_shows_its_last_log_line_in_the_list(me, member, team, image, local_node):
    now = timezone.now()
    ended_job(member, team, outcome=Outcome.FAILED, at=now, exit_code=3, name="load",
              log=b"Traceback (most recent call last):\nERROR: upstream table missing\n")  # fmt: skip
    ended_job(member, team, outcome=Outcome.SUCCEEDED, at=now - timedelta(minutes=1), name="fine", log=b"all good\n")

    page = me.get("/jobs/").content.decode()

    assert '<th scope="col">Last log line</th>' in page
    row = r'id="row-[^"]+">([^<]+)</a>.*?<td data-label="Last log line" class="excerpt-cell">(.*?)</td>'
    cells = dict(re.findall(row, page, re.S))
    assert cells["fine"] == ""
    assert cells["load"] == (
        '<span class="excerpt-line" title="ERROR: upstream table missing">ERROR: upstream table missing</span>'
    )


def test_the_polled_rows_carry_the_column_too(me, member, team, image, local_node):
    ended_job(member, team, outcome=Outcome.TIMED_OUT, at=timezone.now(), name="slow", log=b"step 9 of 10\n")

    rows = me.get("/jobs/", HTTP_HX_REQUEST="true").content.decode()

    assert "<html" not in rows and ">step 9 of 10</span>" in rows


def test_a_long_last_line_is_cut_to_its_end(me, member, team, image, local_node):
    ended_job(member, team, outcome=Outcome.FAILED, at=timezone.now(), exit_code=1, name="long",
              log=b"x" * 1000 + b" the end\n")  # fmt: skip

    line = re.search(r'<span class="excerpt-line" title="([^"]*)"', me.get("/jobs/").content.decode()).group(1)

    assert line.startswith("…") and line.endswith(" the end") and len(line) == 300
