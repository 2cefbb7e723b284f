"""GET /api/v1/accounting/records/ and /api/v1/accounting/usage/."""

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from rest_framework.pagination import PageNumberPagination
from rest_framework.test import APIClient

from jobs.models import Outcome
from tests.openapi import answer_schema, undeclared

RECORDS = "/api/v1/accounting/records/"
USAGE = "/api/v1/accounting/usage/"
DAY1 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=1)


@pytest.fixture
def ledger(released, member, teammate, outsider, team, other_team):
    """Red team: two jobs on day 1 (n1), one on day 2 (n2). Blue team: one on day 2 (n1)."""
    return {
        "red-1": released(member, team, held_at=DAY1, held_for=timedelta(hours=1)),
        "red-2": released(teammate, team, held_at=DAY1, held_for=timedelta(hours=2), cpus=2, outcome=Outcome.FAILED),
        "red-3": released(member, team, node="n2", held_at=DAY2, held_for=timedelta(minutes=30)),
        "blue-1": released(outsider, other_team, held_at=DAY2, held_for=timedelta(hours=4), outcome=Outcome.TIMED_OUT),
    }


def ids(response) -> set[str]:
    assert response.status_code == 200, response.content
    return {r["id"] for r in response.json()["results"]}


def ids_of(ledger, *names) -> set[str]:
    return {str(ledger[n].id) for n in names}


# --- records ------------------------------------------------------------------------------------


def test_a_member_sees_the_records_of_their_teams_only(api, outsider_api, ledger):
    assert ids(api.get(RECORDS)) == ids_of(ledger, "red-1", "red-2", "red-3")
    assert ids(outsider_api.get(RECORDS)) == ids_of(ledger, "blue-1")


def test_an_operator_sees_every_record(operator_api, ledger):
    assert ids(operator_api.get(RECORDS)) == ids_of(ledger, *ledger)


def test_records_are_listed_newest_first_with_the_contract_fields(api, ledger):
    results = api.get(RECORDS).json()["results"]

    assert [r["sequence"] for r in results] == [3, 2, 1]
    red2 = results[1]
    record = ledger["red-2"]
    assert red2["job"] == str(record.job_id) and red2["team"] == "red" and red2["node"] == "n1"
    assert (red2["cpu_set"], red2["cpus"], red2["memory_mb"], red2["gpus"]) == ([0, 1], 2, 64, 0)
    assert red2["held_at"].startswith("2026-03-02T09:00:00") and red2["released_at"].startswith("2026-03-02T11:00")
    assert (Decimal(red2["held_seconds"]), Decimal(red2["cost"])) == (Decimal("7200"), record.cost)
    assert red2["outcome"] == "failed" and red2["hash"] == record.hash and red2["prev_hash"] == ledger["red-1"].hash
    assert {"cpu_seconds", "gpu_ids", "memory_peak_mb"} <= set(red2)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("team=red", ["red-1", "red-2", "red-3"]),
        ("team=blue", ["blue-1"]),
        ("node=n2", ["red-3"]),
        ("outcome=failed", ["red-2"]),
        ("outcome=timed_out&node=n1", ["blue-1"]),
    ],
)
def test_an_operator_filters_records(operator_api, ledger, query, expected):
    assert ids(operator_api.get(f"{RECORDS}?{query}")) == ids_of(ledger, *expected)


def test_a_member_filtering_by_another_team_sees_nothing(api, ledger):
    assert ids(api.get(f"{RECORDS}?team=blue")) == set()


def test_records_filter_by_job(api, ledger):
    job_id = ledger["red-2"].job_id

    assert ids(api.get(f"{RECORDS}?job={job_id}")) == ids_of(ledger, "red-2")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("since=2026-03-03", ["red-3"]),  # released on day 2 (red-1 and red-2 on day 1)
        ("until=2026-03-03", ["red-1", "red-2"]),  # until is exclusive
        ("since=2026-03-02T10:00:00Z&until=2026-03-02T11:00:00Z", ["red-1"]),
        ("since=2026-03-02T11:00:00%2B01:00", ["red-1", "red-2", "red-3"]),
        ("since=2026-04-01", []),
        ("since=100000d", ["red-1", "red-2", "red-3"]),  # a duration back from now
        ("until=100000d", []),
        ("team=&node=&outcome=&job=&since=", ["red-1", "red-2", "red-3"]),  # an empty value filters nothing
    ],
)
def test_records_filter_by_release_time(api, ledger, query, expected):
    assert ids(api.get(f"{RECORDS}?{query}")) == ids_of(ledger, *expected)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("job=not-a-uuid", "job"),
        ("outcome=ok", "outcome"),
        ("team=red+team", "team"),
        ("node=n1/../n2", "node"),
        ("since=yesterday", "since"),
        ("until=2026-02-30", "until"),
    ],
)
def test_a_bad_filter_value_is_400_naming_the_filter(api, ledger, query, field):
    response = api.get(f"{RECORDS}?{query}")

    assert response.status_code == 400, response.content
    assert list(response.json()) == [field] and response.json()[field][0]


def test_records_are_paged(operator_api, ledger, monkeypatch):
    monkeypatch.setattr(PageNumberPagination, "page_size", 2)

    first = operator_api.get(f"{RECORDS}?node=n1").json()
    second = operator_api.get(first["next"]).json()

    assert first["count"] == 3 and "node=n1" in first["next"]
    assert {r["id"] for r in first["results"] + second["results"]} == ids_of(ledger, "red-1", "red-2", "blue-1")


def test_the_schema_documents_the_records_filters(client, db):
    schema = client.get("/api/schema/?format=json").json()

    parameters = {p["name"]: p for p in schema["paths"]["/api/v1/accounting/records/"]["get"]["parameters"]}
    assert set(parameters) == {"team", "user", "node", "outcome", "job", "since", "until", "page", "format"}
    assert parameters["job"]["schema"]["format"] == "uuid"
    assert re.match(parameters["job"]["schema"]["pattern"], "0f0e4c2a-1b2c-4d5e-8f90-0123456789ab")
    assert set(parameters["outcome"]["schema"]["enum"]) == set(Outcome.values)
    assert all(p["in"] == "query" and p.get("description") for p in parameters.values())


def test_a_record_is_shown_to_its_team_and_is_404_to_outsiders(api, outsider_api, operator_api, ledger):
    url = f"{RECORDS}{ledger['red-1'].id}/"

    assert api.get(url).json()["sequence"] == 1
    assert operator_api.get(url).status_code == 200
    assert outsider_api.get(url).status_code == 404
    assert api.get(f"{RECORDS}00000000-0000-0000-0000-000000000000/").status_code == 404


@pytest.mark.parametrize(("method", "path"), [("post", ""), ("put", "{id}/"), ("patch", "{id}/"), ("delete", "{id}/")])
def test_records_cannot_be_written_through_the_api(operator_api, ledger, method, path):
    response = getattr(operator_api, method)(RECORDS + path.format(id=ledger["red-1"].id), {})

    assert response.status_code == 405


@pytest.mark.parametrize("url", [RECORDS, USAGE])
def test_anonymous_callers_are_refused(ledger, url):
    assert APIClient().get(url).status_code in (401, 403)


def test_records_list_queries_do_not_grow_with_records(api, released, member, team, django_assert_max_num_queries):
    for _ in range(10):
        released(member, team)

    with django_assert_max_num_queries(4):
        response = api.get(RECORDS)

    assert response.json()["count"] == 10


# --- usage --------------------------------------------------------------------------------------


def usage(client, query: str) -> dict[str, dict]:
    response = client.get(f"{USAGE}?{query}")
    assert response.status_code == 200, response.content
    body = response.json()
    return {row[body["group_by"]]: row for row in body["rows"]}


def test_usage_by_team_adds_up_each_teams_records(operator_api, ledger):
    rows = usage(operator_api, "group_by=team")

    assert set(rows) == {"red", "blue"}
    assert (rows["red"]["jobs"], rows["red"]["records"]) == (3, 3)
    assert Decimal(rows["red"]["held_seconds"]) == Decimal(3600 + 7200 + 1800)
    assert Decimal(rows["red"]["cost"]) == sum(ledger[n].cost for n in ("red-1", "red-2", "red-3"))
    assert Decimal(rows["blue"]["held_seconds"]) == Decimal(4 * 3600)


def test_a_member_sees_usage_of_their_teams_only(api, ledger):
    assert set(usage(api, "group_by=team")) == {"red"}
    assert {n: r["records"] for n, r in usage(api, "group_by=node").items()} == {"n1": 2, "n2": 1}


def test_usage_by_node(operator_api, ledger):
    rows = usage(operator_api, "group_by=node")

    assert {n: r["records"] for n, r in rows.items()} == {"n1": 3, "n2": 1}


def test_usage_by_day_is_the_default_and_counts_the_day_of_release(operator_api, ledger):
    rows = usage(operator_api, "")

    assert {d: r["records"] for d, r in rows.items()} == {"2026-03-02": 2, "2026-03-03": 2}


@pytest.mark.parametrize("group_by", ["day", "team", "node"])
def test_the_schema_names_every_field_of_the_usage(api, ledger, group_by):
    document, schema = answer_schema(USAGE)

    answer = api.get(USAGE, {"group_by": group_by}).json()

    assert answer["rows"] and answer["store"] and undeclared(document, schema, answer) == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("since=2026-03-03", {"2026-03-03": 2}),
        ("until=2026-03-03", {"2026-03-02": 2}),  # until is exclusive
        ("since=2026-03-02T10:30:00Z&until=2026-03-03T09:45:00Z", {"2026-03-02": 1, "2026-03-03": 1}),
        ("since=2026-03-02T10:00:00Z&until=2026-03-02T11:00:00Z", {"2026-03-02": 1}),  # red-1 only
        ("since=2026-04-01", {}),
        ("since=100000d", {"2026-03-02": 2, "2026-03-03": 2}),  # a duration back from now
        ("until=100000d", {}),
    ],
)
def test_usage_between_since_and_until(operator_api, ledger, query, expected):
    rows = usage(operator_api, f"group_by=day&{query}")

    assert {d: r["records"] for d, r in rows.items()} == expected


def test_an_unknown_group_by_is_400(api, ledger):
    response = api.get(f"{USAGE}?group_by=user")

    assert response.status_code == 400
    assert "group_by" in response.json()


@pytest.mark.parametrize("when", ["yesterday", "2026-13-01", "2026-02-30", "2026-03-02T25:00:00"])
@pytest.mark.parametrize("name", ["since", "until"])
def test_a_bad_date_is_400(api, ledger, name, when):
    response = api.get(f"{USAGE}?{name}={when}")

    assert response.status_code == 400
    assert name in response.json()


def test_usage_queries_do_not_grow_with_records(api, released, member, team, django_assert_max_num_queries):
    for _ in range(10):
        released(member, team)

    with django_assert_max_num_queries(6):  # 3 of them the store's, whatever the number of teams
        response = api.get(f"{USAGE}?group_by=node")

    assert response.json()["rows"][0]["records"] == 10


def test_usage_answers_get_only(api, db):
    assert api.post(USAGE, {}).status_code == 405
