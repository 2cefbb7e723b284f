"""Monthly statements: HTML (printable), JSON and CSV; totals are the sum of the records to the cent;
the ledger's sequence range and head are on it; members see their team's, operators every team's and
the pool's summary; anyone else gets 404."""

import csv
import io
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal

import pytest

from accounting.models import RateCard, Record
from core.formats import money
from core.outcomes import Outcome
from tests.accounting.conftest import NOW
from tests.openapi import answer_schema, undeclared

API = "/api/v1/accounting/statements/"


@pytest.fixture
def month_of_records(released, member, team, outsider, other_team):
    """Records of March 2026 whose costs have fractions of a cent, one of April, one of another team."""
    RateCard.objects.create(
        effective_from=NOW - timedelta(days=30), core_hour=Decimal("0.013"), gb_hour=Decimal("0.0007"),
        gpu_hour=Decimal("0"), created_at=NOW,
    )  # fmt: skip
    mine = [
        released(
            member, team, held_at=NOW + timedelta(hours=i), held_for=timedelta(seconds=1237 * (i + 1)), cpus=i % 3 + 1
        )
        for i in range(7)
    ]
    released(member, team, held_at=NOW + timedelta(days=40))  # April
    released(outsider, other_team, held_at=NOW)
    return mine


def cents(value: Decimal) -> str:
    return str(value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def test_the_json_statement_totals_the_records_to_the_cent(api, month_of_records):
    body = api.get(API, {"team": "red", "month": "2026-03"}).json()

    exact = sum((r.cost for r in month_of_records), Decimal(0))
    assert (body["team"], body["month"], body["currency"]) == ("red", "2026-03", "EUR")
    assert body["total_cost"] == cents(exact) and Decimal(body["total_cost_exact"]) == exact
    assert [line["sequence"] for line in body["lines"]] == [r.sequence for r in month_of_records]
    assert sum(Decimal(line["cost"]) for line in body["lines"]) == exact
    assert body["ledger"]["first_sequence"] == month_of_records[0].sequence
    assert body["ledger"]["last_sequence"] == month_of_records[-1].sequence
    assert body["ledger"]["last_hash"] == month_of_records[-1].hash
    assert body["ledger"]["head_sequence"] == Record.objects.count()
    assert "rounded once" in body["rounding"]


def test_the_csv_statement_has_one_row_per_record_adding_to_the_same_total(api, month_of_records):
    response = api.get(API, {"team": "red", "month": "2026-03", "format": "csv"})

    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == len(month_of_records)
    exact = sum((Decimal(row["cost"]) for row in rows), Decimal(0))
    assert exact == sum((r.cost for r in month_of_records), Decimal(0))
    assert {row["currency"] for row in rows} == {"EUR"}


def test_the_html_statement_shows_the_same_total_and_the_ledger_range(client, member, month_of_records):
    client.force_login(member)

    response = client.get("/accounting/statements/red/2026-03/")

    text = response.content.decode()
    exact = sum((r.cost for r in month_of_records), Decimal(0))
    assert response.status_code == 200
    assert f"<strong>{cents(exact)} EUR</strong>" in text and f"exact: {exact}" in text
    assert f"sequences {month_of_records[0].sequence} to {month_of_records[-1].sequence}" in text
    assert month_of_records[-1].hash in text and "verify_ledger" in text
    assert "noprint" in text  # the links are left out of the printed page (e31.css, @media print)


def test_the_html_statement_writes_each_line_for_people(client, member, team, released):
    client.force_login(member)
    oom = released(member, team, held_for=timedelta(seconds=165.857), outcome=Outcome.OUT_OF_MEMORY, cpus=1)
    long = released(member, team, held_at=NOW + timedelta(hours=2), held_for=timedelta(hours=1, minutes=5), cpus=2)

    text = client.get("/accounting/statements/red/2026-03/").content.decode()

    assert f'<td class="nowrap" title="{oom.held_seconds} s">2 m 46 s</td>' in text  # not 165.857000
    assert f'<td class="nowrap" title="{long.held_seconds} s">1 h 05 m</td>' in text
    assert "1 core · 64 MB · 0 gpus" in text and "2 cores · 64 MB · 0 gpus" in text and "1 cpu" not in text
    assert ">out of memory</span>" in text and ">out_of_memory<" not in text
    assert f">{money(oom.cost, 'EUR')}</td></tr>" in text


def test_a_statement_says_preempted_attempts_are_not_charged(api, client, member, team, released):
    preempted = released(member, team, held_for=timedelta(minutes=30), outcome=Outcome.PREEMPTED, cpus=2)
    charged = released(member, team, held_at=NOW + timedelta(hours=1), held_for=timedelta(minutes=30), cpus=2)
    client.force_login(member)

    body = api.get(API, {"team": "red", "month": "2026-03"}).json()
    rows = list(csv.DictReader(io.StringIO(
        api.get(API, {"team": "red", "month": "2026-03", "format": "csv"}).content.decode())))  # fmt: skip
    page = client.get("/accounting/statements/red/2026-03/").content.decode()

    lines = [(line["outcome"], line["charged"], Decimal(line["cost"])) for line in body["lines"]]
    assert lines == [(Outcome.PREEMPTED, False, 0), (Outcome.SUCCEEDED, True, charged.cost)] and charged.cost > 0
    assert Decimal(body["total_cost_exact"]) == charged.cost
    assert body["not_charged"]["records"] == 1
    assert body["not_charged"]["rule"].startswith("Attempts preempted by a higher queue's job are not charged")
    assert [(row["outcome"], row["charged"], row["cost"]) for row in rows] == [
        ("preempted", "False", "0.000000"), ("succeeded", "True", format(charged.cost, "f"))]  # fmt: skip
    assert "Attempts preempted by a higher queue&#x27;s job are not charged" in page
    assert "1 record this month." in page
    assert f'<td>{preempted.cost}</td><td class="nowrap">0.00 EUR <span class="muted">(not charged)</span></td>' in page


def test_a_month_without_records_is_an_empty_statement(api, member, team):
    body = api.get(API, {"team": "red", "month": "2025-01"}).json()

    assert (body["total_cost"], body["lines"], body["ledger"]["first_sequence"]) == ("0.00", [], None)


@pytest.mark.parametrize("month", ["2026-13", "2026-3", "march", ""])
def test_a_bad_month_is_400(api, team, month):
    response = api.get(API, {"team": "red", "month": month})

    assert response.status_code == 400 and "month" in response.json()


def test_another_teams_statement_is_404(api, client, member, month_of_records):
    client.force_login(member)

    assert api.get(API, {"team": "blue", "month": "2026-03"}).status_code == 404
    assert api.get(API, {"team": "nope", "month": "2026-03"}).status_code == 404
    assert client.get("/accounting/statements/blue/2026-03/").status_code == 404


def test_a_member_must_name_the_team(api, month_of_records):
    assert api.get(API, {"month": "2026-03"}).status_code == 400


def test_operators_see_every_teams_statement_and_the_pool_summary(client, operator, month_of_records):
    from tests.conftest import api_client_for

    ops = api_client_for(operator)
    client.force_login(operator)

    blue = ops.get(API, {"team": "blue", "month": "2026-03"}).json()
    pool = ops.get(API, {"month": "2026-03"}).json()
    page = client.get("/accounting/statements/", {"month": "2026-03"}).content.decode()

    march = Record.objects.filter(released_at__month=3, released_at__year=2026)
    assert len(blue["lines"]) == 1
    assert [t["team"] for t in pool["teams"]] == ["blue", "red"]
    assert Decimal(pool["total_cost_exact"]) == sum((r.cost for r in march), Decimal(0))
    assert 'id="pool-summary"' in page and f"{pool['total_cost']} EUR" in page
    assert '">9 h 37 m</td>' in page  # red's 28 × 1237 held seconds


def test_the_schema_names_every_field_of_a_statement_and_of_the_pool_summary(operator, month_of_records):
    from tests.conftest import api_client_for

    ops = api_client_for(operator)
    document, schema = answer_schema(API)

    for query in ({"team": "red", "month": "2026-03"}, {"month": "2026-03"}):
        answer = ops.get(API, query).json()
        assert answer["ledger"] and undeclared(document, schema, answer) == [], query


def test_wrong_method_is_405(api, team):
    assert api.post(API, {"team": "red", "month": "2026-03"}).status_code == 405


def test_the_csv_statement_neutralises_a_job_name_that_a_spreadsheet_would_run(api, released, member, team):
    released(member, team, name="@SUM(1+1)*cmd|' /C calc'!A0")

    response = api.get(API, {"team": "red", "month": "2026-03", "format": "csv"})

    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [row["job_name"] for row in rows] == ["'@SUM(1+1)*cmd|' /C calc'!A0"]
