"""Utilisation: held core-seconds over available core-seconds per node and overall, by hour or day, from
the records and the nodes' registration and drain history. Operators only (others 404)."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from jobs.lifecycle.actions import hold
from pool.models import NodeStateChange
from pool.nodes import Capacity, register, set_state
from pool.placement.types import Placement
from pool.utilisation import utilisation
from tests.conftest import api_client_for
from tests.factories import run_to_release, submit_job
from tests.openapi import answer_schema, undeclared

DAY = datetime(2026, 3, 2, tzinfo=UTC)
API = "/api/v1/accounting/utilisation/"


@pytest.fixture
def history(member, team, operator):
    """n1 (4 cores) from 00:00; n2 (2 cores) from 12:00, drained 18:00-20:00 by an operator.
    Held: 2 cores of n1 from 01:30 to 03:30, 1 core of n2 from 13:00 to 14:00."""
    n1 = register("n1", Capacity(cpu_ids=[0, 1, 2, 3], memory_mb=4096, gpu_ids=[]), now=DAY)
    n2 = register("n2", Capacity(cpu_ids=[0, 1], memory_mb=2048, gpu_ids=[]), now=DAY + timedelta(hours=12))
    set_state(n2, "draining", now=DAY + timedelta(hours=18), acting_user=operator)
    set_state(n2, "active", now=DAY + timedelta(hours=20), acting_user=operator)
    for node, cores, start, hours in ((n1, [0, 1], 1.5, 2), (n2, [0], 13, 1)):
        job = submit_job(member, team, cpus=len(cores), time_limit_s=hours * 3600)
        hold([Placement(job.pk, 1, node, cores, [], job.memory_mb)], now=DAY + timedelta(hours=start))
        job.refresh_from_db()
        run_to_release(job, now=DAY + timedelta(hours=start + hours))
    assert NodeStateChange.objects.count() == 2


def test_held_over_available_per_node_and_overall_by_day(history):
    report = utilisation(since=DAY, until=DAY + timedelta(days=1), step="day", now=DAY + timedelta(days=2)).as_dict()

    nodes = {n["node"]: n for n in report["nodes"]}
    assert nodes["n1"]["held_core_seconds"] == 2 * 2 * 3600 and nodes["n1"]["available_core_seconds"] == 4 * 86400
    assert nodes["n2"]["held_core_seconds"] == 3600 and nodes["n2"]["available_core_seconds"] == 2 * 12 * 3600
    assert nodes["n2"]["drained_core_seconds"] == 2 * 2 * 3600
    assert report["overall"]["utilisation"] == format((4 * 3600 + 3600) / (4 * 86400 + 24 * 3600), ".4f")
    assert len(report["buckets"]) == 1


def test_by_hour_a_hold_is_cut_at_the_hour(history):
    report = utilisation(since=DAY, until=DAY + timedelta(hours=4), step="hour", now=DAY + timedelta(days=2)).as_dict()

    held = [b["held_core_seconds"] for b in report["buckets"]]
    assert held == [0, 2 * 1800, 2 * 3600, 2 * 1800]
    assert [b["utilisation"] for b in report["buckets"]] == ["0.0000", "0.2500", "0.5000", "0.2500"]


def test_a_hold_not_released_counts_up_to_now(history, member, team):
    from pool.models import Node

    job = submit_job(member, team, cpus=1)
    hold([Placement(job.pk, 1, Node.objects.get(name="n1"), [3], [], job.memory_mb)], now=DAY + timedelta(hours=22))

    report = utilisation(since=DAY, until=DAY + timedelta(days=1), step="day", now=DAY + timedelta(hours=23)).as_dict()

    nodes = {n["node"]: n for n in report["nodes"]}
    assert nodes["n1"]["held_core_seconds"] == 4 * 3600 + 3600
    assert nodes["n1"]["available_core_seconds"] == 4 * 23 * 3600  # up to now


def test_the_api_and_page_are_for_operators_only(history, api, operator, client, member):
    ops = api_client_for(operator)

    body = ops.get(API, {"since": "2026-03-02", "until": "2026-03-03", "step": "day"}).json()
    bad = ops.get(API, {"step": "week"})
    client.force_login(operator)
    page = client.get("/accounting/utilisation/", {"since": "2026-03-02", "until": "2026-03-03"})

    assert {n["node"] for n in body["nodes"]} == {"n1", "n2"}
    assert bad.status_code == 400 and "step" in bad.json()
    assert page.status_code == 200 and 'id="overall"' in page.content.decode()
    assert api.get(API).status_code == 404
    client.force_login(member)
    assert client.get("/accounting/utilisation/").status_code == 404


@pytest.mark.parametrize("step", ["day", "hour"])
def test_the_schema_names_every_field_of_the_utilisation(history, operator, step):
    document, schema = answer_schema(API)

    answer = api_client_for(operator).get(API, {"since": "2026-03-02", "until": "2026-03-03", "step": step}).json()

    assert answer["buckets"][0]["nodes"] and undeclared(document, schema, answer) == []


def test_a_hold_over_several_buckets_is_cut_at_each_edge_to_the_microsecond(history, member, team):
    from pool.models import Node

    n1 = Node.objects.get(name="n1")
    job = submit_job(member, team, cpus=2, time_limit_s=4 * 3600)
    hold([Placement(job.pk, 1, n1, [2, 3], [], job.memory_mb)], now=DAY - timedelta(hours=1))
    job.refresh_from_db()
    run_to_release(job, now=DAY + timedelta(hours=2, minutes=30, microseconds=500_000))

    report = utilisation(since=DAY, until=DAY + timedelta(hours=4), step="hour", now=DAY + timedelta(days=2)).as_dict()

    # This hold: 2 cores from an hour before the report to 02:30:00.5; the fixture's: 2 cores, 01:30 to 03:30.
    held = [b["held_core_seconds"] for b in report["buckets"]]
    assert held == [2 * 3600, 2 * 3600 + 2 * 1800, 2 * 1800.5 + 2 * 3600, 2 * 1800]


TODAY_0230 = DAY + timedelta(days=1, hours=2, minutes=30)


@pytest.fixture
def held_today(history, member, team):
    """One core of n1 held from 00:30 to 01:30 of the next day, which is today at 02:30."""
    from pool.models import Node

    job = submit_job(member, team, cpus=1, time_limit_s=3600)
    n1 = Node.objects.get(name="n1")
    hold([Placement(job.pk, 1, n1, [0], [], job.memory_mb)], now=TODAY_0230 - timedelta(hours=2))
    job.refresh_from_db()
    run_to_release(job, now=TODAY_0230 - timedelta(hours=1))


def test_the_page_by_default_includes_today_up_to_now_in_percent_with_a_chart(held_today, client, operator):
    client.force_login(operator)

    with time_machine.travel(TODAY_0230, tick=False):
        page = client.get("/accounting/utilisation/").content.decode()

    # Held: 5 core-hours the day before and 1 today; available: 120 core-hours then and 4 + 2 cores for 2.5 h.
    assert '<p id="overall"><strong>4.4 %</strong> of the pool held: 6.00 core-hours of 135.00 core-hours' in page
    assert "2026-03-03 02:30</time> UTC" in page  # to now
    assert '<td class="nowrap">2026-03-03</td><td class="nowrap">1.00</td>' in page  # today's row
    assert "<td>n1</td>" in page and "No node" not in page
    assert 'id="utilisation-chart"' in page and ">100 %</text>" in page and "Utilisation per day" in page
    assert "0.0444" not in page and "—" not in page


def test_hours_not_yet_come_are_not_shown(held_today, client, operator):
    client.force_login(operator)

    with time_machine.travel(TODAY_0230, tick=False):
        page = client.get("/accounting/utilisation/", {"step": "hour", "since": "2026-03-03", "until": "2026-03-04"})

    text = page.content.decode()
    assert page.status_code == 200
    assert "2026-03-03 02:00" in text and "2026-03-03 03:00" not in text  # the hour under way is the last
    assert text.count('<tr><td class="nowrap">2026-03-03 ') == 3


def test_a_window_yet_to_begin_says_so(held_today, client, operator):
    client.force_login(operator)

    with time_machine.travel(TODAY_0230, tick=False):
        page = client.get("/accounting/utilisation/", {"since": "2026-04-01"}).content.decode()

    assert "This window has not begun yet." in page


def test_the_api_by_default_ends_with_the_bucket_under_way(held_today, operator):
    with time_machine.travel(TODAY_0230, tick=False):
        body = api_client_for(operator).get(API, {"step": "hour"}).json()

    assert body["until"] == "2026-03-03T03:00:00+00:00" and body["buckets"][-1]["start"] == "2026-03-03T02:00:00+00:00"
    assert body["buckets"][-1]["utilisation"] == "0.0000" and len(body["buckets"]) == 7 * 24
