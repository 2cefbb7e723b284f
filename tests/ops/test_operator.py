"""/operator/: staff only (anyone else gets 404); isolation failures first; each node's capacity, state and
heartbeat (polled); drain and resume after a confirmation, recorded with who; the meters, the queue, failures
of every team, usage by team and the pool's utilisation; a query count that does not grow with the jobs."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from accounting.models import Record
from isolation.status import last_rounds, node_statuses
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Outcome
from ops.panel import LISTED, usage_by_team, utilisation
from pool.models import Node, NodeStateChange
from pool.nodes import Capacity, mark_lost_nodes, register, set_features
from tests.factories import submit_job, waiting_on_upstreams
from tests.isolation.test_page import judged  # noqa: F401 (a fixture)
from tests.ops.conftest import released_job


@pytest.fixture
def op(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def node(db):
    return register("n1", Capacity(cpu_ids=[0, 1, 2, 3], memory_mb=4096, gpu_ids=["g0"]), now=timezone.now())


@pytest.mark.parametrize("url", ["/operator/", "/operator/nodes/", "/operator/nodes/n1/drain/"])
def test_a_member_who_is_not_staff_gets_404(client, member, node, url):
    client.force_login(member)

    assert client.get(url).status_code == 404
    assert client.post(url).status_code in (404, 405)
    assert Node.objects.get(name="n1").state == Node.State.ACTIVE


def test_nobody_signed_in_is_sent_to_log_in(client, db):
    response = client.get("/operator/")

    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_panel_shows_each_nodes_capacity_used_and_free(op, member, team, node, image):
    submit_job(member, team, image=image, name="holding two", cpus=2, memory_mb=1024)
    schedule_pass(now=timezone.now())

    page = op.get("/operator/").content.decode()

    assert "cores: 2 used, 2 free of 4" in page
    assert "MB: 1024 used, 3072 free of 4096" in page
    assert "gpus: 0 used, 1 free of 1" in page
    assert '<meter id="n1-cores" min="0" max="4" value="2">' in page
    assert "holding two" in page  # its meter runs
    assert 'href="/operator/nodes/n1/drain/"' in page


def test_a_nodes_card_shows_its_features_on_the_panel_and_its_page(op, node):
    set_features(node, ["bigmem", "nvme"])
    register("n2", Capacity(cpu_ids=[0], memory_mb=1024, gpu_ids=[]), now=timezone.now())  # has none

    for url in ("/operator/", "/operator/nodes/n1/"):
        page = op.get(url).content.decode()
        assert '<p class="node-features" id="features-n1">Features: bigmem, nvme</p>' in page
        assert 'id="features-n2"' not in page


def test_isolation_probe_failures_come_first(op, judged, local_node):  # noqa: F811
    page = op.get("/operator/").content.decode()

    assert "network failed" in page
    assert page.index("network failed") < page.index('id="nodes"')


def test_drain_asks_for_confirmation_then_drains_and_records_who(op, operator, node):
    confirm = op.get("/operator/nodes/n1/drain/")
    assert confirm.status_code == 200 and b"Yes, drain n1" in confirm.content
    assert Node.objects.get(name="n1").state == Node.State.ACTIVE  # asking changes nothing

    response = op.post("/operator/nodes/n1/drain/", {"reason": "kernel upgrade"}, follow=True)

    node.refresh_from_db()
    assert (node.state, node.state_changed_by) == (Node.State.DRAINING, operator)
    assert NodeStateChange.objects.filter(node=node, to_state=Node.State.DRAINING, by=operator).exists()
    assert response.redirect_chain == [("/operator/", 302)]
    assert "Node n1 drained" in response.content.decode()  # the message after the action
    assert b'href="/operator/nodes/n1/resume/"' in response.content


def test_resume_brings_a_drained_node_back(op, node):
    op.post("/operator/nodes/n1/drain/", {"reason": "kernel upgrade"})

    response = op.post("/operator/nodes/n1/resume/", follow=True)

    assert Node.objects.get(name="n1").state == Node.State.ACTIVE
    assert "Node n1 resumed" in response.content.decode()


def test_a_lost_node_cannot_be_resumed_by_hand_and_shows_as_lost(op, node):
    Node.objects.filter(pk=node.pk).update(last_heartbeat=timezone.now() - timedelta(minutes=5))
    mark_lost_nodes(now=timezone.now(), after=timedelta(seconds=30))

    response = op.post("/operator/nodes/n1/resume/", follow=True)
    partial = op.get("/operator/nodes/").content.decode()

    assert Node.objects.get(name="n1").state == Node.State.OFFLINE
    assert "is offline" in response.content.decode()
    assert 'data-state="offline"' in partial and "Lost: no heartbeat" in partial and "<html" not in partial
    assert "lost: no heartbeat since" in op.get("/operator/").content.decode()  # in the lost nodes' list


def test_an_unknown_node_or_action_is_404(op, node):
    assert op.get("/operator/nodes/nope/drain/").status_code == 404
    assert op.post("/operator/nodes/n1/explode/").status_code == 404


def test_failures_of_every_team_and_the_queue_with_its_reason(op, member, team, outsider, other_team, node, image):
    released_job(outsider, other_team, name="blue crashed", outcome=Outcome.FAILED, exit_code=3, reason="exit 3")
    released_job(member, team, name="red fine")
    submit_job(member, team, image=image, name="too big to fit now", cpus=4)
    submit_job(member, team, image=image, name="blocks the next", cpus=4)
    schedule_pass(now=timezone.now())

    page = op.get("/operator/").content.decode()

    failures = page[page.index('id="failures-heading"') :]
    assert "blue crashed" in failures and "exit 3" in failures and "red fine" not in failures
    queue = page[page.index('id="queue-heading"') : page.index('id="lost-heading"')]
    assert "Queue (1 waiting)" in queue or "Queue (2 waiting)" in queue
    assert "blocks the next" in queue


def test_usage_by_team_now_and_over_30_days(op, member, team, outsider, other_team, node, image):
    released_job(outsider, other_team, name="blue job", cpus=2, held_for=timedelta(hours=2))
    submit_job(member, team, image=image, name="red running", cpus=3)
    schedule_pass(now=timezone.now())

    page = op.get("/operator/").content.decode()

    usage = page[page.index('id="teams-heading"') : page.index('id="utilisation-heading"')]
    blue_cost = Record.objects.get(team=other_team).cost
    assert '<td>blue</td><td>0</td><td>0 MB</td><td>0</td><td>1</td><td class="nowrap">4.00 core-hours</td>' in usage
    assert f"{blue_cost:.2f}" in usage
    assert "<td>red</td><td>3</td><td>64 MB</td><td>1</td>" in usage


def test_utilisation_counts_each_hold_for_its_time_in_each_bucket(member, team, node, image):
    released_job(member, team, name="two cores for six hours", cpus=2, held_for=timedelta(hours=6))

    chart = utilisation(now=timezone.now(), days=1, bucket_hours=1)

    # 2 cores × 6 hours spread over the last hourly buckets: 12 core-hours in all, at most 2 in any hour.
    values = [bar.amount for bar in chart.bars]
    assert sum(values) == pytest.approx(12.0, abs=0.2)
    assert max(values) == pytest.approx(2.0, abs=0.05)
    assert chart.limit_y is not None  # the pool's 4 cores


@pytest.mark.parametrize("waiting", [2, 1000])
def test_the_panel_query_count_does_not_grow_with_the_jobs(
    op, member, team, outsider, other_team, node, image, waiting, django_assert_max_num_queries
):
    released_job(outsider, other_team, name="failed", outcome=Outcome.FAILED, exit_code=1)
    released_job(member, team, name="fine")
    for n in range(waiting):
        submit_job(member, team, image=image, name=f"waiting {n}", cpus=4)
    schedule_pass(now=timezone.now())

    # 21 with a short queue (its count read only past 12 rows), the rates, the probes' verdicts of the day
    with django_assert_max_num_queries(22):
        response = op.get("/operator/")

    assert response.status_code == 200 and b"waiting 0" in response.content


@pytest.mark.parametrize("count", [1, 15])
def test_the_panel_names_each_upstream_in_queries_that_do_not_grow_with_them(
    op, member, team, image, count, django_assert_max_num_queries
):
    register("wide", Capacity(cpu_ids=list(range(16)), memory_mb=16384, gpu_ids=[]), now=timezone.now())
    waiting = waiting_on_upstreams(member, team, image=image, count=count)
    for job in waiting:  # and failures whose reason names a job, read apart from the queue's
        released_job(member, team, name=f"after {job.name}", outcome=Outcome.FAILED, exit_code=1,
                     reason=f"exit code 1 reading the outputs of job {job.pk}")  # fmt: skip

    # 21 as in the test above, the counts of the holds, the queue and the failures (past 12 rows each), and
    # the names the reasons of each list name: one query a list.
    with django_assert_max_num_queries(26):
        page = op.get("/operator/").content.decode()

    for job in waiting[:LISTED]:  # the queue's first
        upstream = job.dependencies.get().on_job
        assert f"waits for job “{upstream.name}” to succeed" in page
    for job in waiting[-LISTED:]:  # the latest failures
        assert f"exit code 1 reading the outputs of job “{job.name}”" in page


def test_usage_over_30_days_counts_the_closed_days_kept_and_todays_live(op, member, team, node):
    released_job(member, team, name="three days ago", cpus=1, held_for=timedelta(hours=1), ago=timedelta(days=3))
    released_job(member, team, name="forty days ago", cpus=1, held_for=timedelta(hours=1), ago=timedelta(days=40))
    (row,) = usage_by_team(now=timezone.now())
    assert (row.records_30d, row.core_hours_30d) == (1, Decimal("1.0"))

    released_job(member, team, name="now", cpus=2, held_for=timedelta(hours=1))  # after the closed days were kept

    (row,) = usage_by_team(now=timezone.now())
    assert (row.records_30d, row.core_hours_30d) == (2, Decimal("3.0"))
    recent = Record.objects.filter(released_at__gte=timezone.now() - timedelta(days=5))
    assert row.cost_30d == sum(r.cost for r in recent)


def test_utilisation_adds_the_kept_buckets_to_the_live_ones(member, team, node, image):
    released_job(member, team, name="forty hours", cpus=1, held_for=timedelta(hours=40))
    submit_job(member, team, image=image, name="running since yesterday", cpus=2)
    schedule_pass(now=timezone.now() - timedelta(hours=30))

    first = utilisation(now=timezone.now(), days=3, bucket_hours=6)  # keeps the buckets over a day old
    second = utilisation(now=timezone.now(), days=3, bucket_hours=6)  # reads them back

    for chart in (first, second):
        core_hours = sum(bar.amount * 6 for bar in chart.bars)
        assert core_hours == pytest.approx(40 + 2 * 30, abs=0.1)


def test_the_panels_isolation_statuses_are_the_pages(judged, local_node):  # noqa: F811
    lean, full = node_statuses(), node_statuses(last_rounds())

    assert [(s.node, s.runtime, s.passed, [r.pk for r in s.failed], [r.pk for r in s.inconclusive]) for s in lean] == [
        (s.node, s.runtime, s.passed, [r.pk for r in s.failed], [r.pk for r in s.inconclusive]) for s in full
    ]
    assert lean[0].failed and lean[0].passed == 1


def test_the_panel_leads_to_the_utilisation_report_and_the_statements(op, node):
    page = op.get("/operator/").content.decode()

    assert 'href="/accounting/utilisation/"' in page and 'href="/accounting/statements/"' in page
    assert op.get("/accounting/utilisation/").status_code == 200
