"""The job list's run time, cost and end columns, the figures the review and the job page show of each job, and
an array's task named in its row by its array's name and its index (`sweep[3]`)."""

import html
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from accounting.meter import Usage
from accounting.rates import currency
from core import formats
from jobs.models import Job, Outcome
from jobs.web import views
from jobs.web.figures import figures
from tests.factories import ended_job, submit_array_of, submit_job

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


def rows(page: str) -> dict[str, dict[str, str]]:
    """Each row's cells by their column, as a person reads them (tags dropped), by the job as the row names it."""
    found = {}
    for row in re.findall(r"<tr data-outcome=.*?</tr>", page, re.S):
        cells = re.findall(r'<td data-label="([^"]+)"[^>]*>(.*?)</td>', row, re.S)
        text = {label: html.unescape(re.sub(r"<[^>]+>", "", cell)).strip() for label, cell in cells}
        found[text["Job"]] = text
    return found


def test_the_list_has_run_time_cost_and_ended_columns(me, member, team, image, local_node):
    page = me.get("/jobs/").content.decode()

    headings = re.findall(r"<th scope=\"col\"[^>]*>(?:<a [^>]*>)?([^<]+?)(?: [↑↓])?(?:</a>)?</th>", page)
    assert headings == ["Job", "Outcome", "Team", "By", "Image", "Request", "Last log line", "Waited", "Run time",
                        "Cost", "Ended", "Submitted"]  # fmt: skip


def test_an_ended_job_shows_its_run_time_cost_and_end_as_its_figures_say(me, member, team, image, local_node):
    at = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    job = ended_job(member, team, outcome=Outcome.FAILED, at=at, exit_code=1, name="train", ran=timedelta(minutes=10),
                    usage=Usage(cpu_seconds=30.0, memory_peak_mb=8))  # fmt: skip
    shown = figures(Job.objects.get(pk=job.pk))

    row = rows(me.get("/jobs/").content.decode())["train"]

    assert row["Run time"] == "10 m 00 s" == formats.duration(shown.run_time)
    assert shown.cost is not None and row["Cost"] == formats.money(shown.cost, currency())
    assert row["Ended"] == timezone.localtime(at).strftime("%Y-%m-%d %H:%M")


def test_a_job_not_run_yet_shows_no_figures(me, member, team, image):
    submit_job(member, team, image=image, name="queued")

    row = rows(me.get("/jobs/").content.decode())["queued"]

    assert (row["Run time"], row["Cost"], row["Ended"]) == ("—", "—", "—")


def test_an_arrays_task_is_named_by_the_array_and_its_index(me, member, team, image):
    submit_array_of(member, team, [0, 3, 7], image=image, name="sweep")
    submit_job(member, team, image=image, name="alone")

    names = set(rows(me.get("/jobs/").content.decode()))
    polled = set(rows(me.get("/jobs/", **HTMX).content.decode()))

    assert names == polled == {"sweep[0]", "sweep[3]", "sweep[7]", "alone"}


def test_the_display_name_is_the_name_alone_for_a_job_and_with_the_index_for_a_task(member, team, image):
    array = submit_array_of(member, team, [3], image=image, name="sweep")
    task = Job.objects.get(array=array)
    job = submit_job(member, team, image=image, name="alone")

    assert (task.display_name, job.display_name) == ("sweep[3]", "alone")


@pytest.mark.parametrize("jobs", [1, 12])
def test_the_figures_cost_no_query_a_row(me, member, team, image, local_node, jobs, monkeypatch,
                                         django_assert_max_num_queries):  # fmt: skip
    monkeypatch.setattr(views, "PAGE_SIZE", 10)
    now = timezone.now()
    for i in range(jobs):
        ended_job(member, team, outcome=Outcome.SUCCEEDED, at=now - timedelta(minutes=i), name=f"job {i}",
                  usage=Usage(cpu_seconds=1.0, memory_peak_mb=8))  # fmt: skip

    with django_assert_max_num_queries(7):  # as many as the list read before it showed these columns
        page = me.get("/jobs/").content.decode()

    assert all(row["Cost"] != "—" and row["Run time"] != "—" for row in rows(page).values())
