"""The operator panel keeps the platform's isolation probes apart from teams' failures (their own line,
counted by verdict), and its rows lead somewhere: a job to its admin page (an operator sees every team's
there; the team job page is for its members), a node to its own page with its history."""

from datetime import timedelta

import pytest
from django.utils import timezone

from isolation.checks import PROBE_JOBS, system_identity
from isolation.models import ProbeResult, Verdict
from isolation.status import probe_summary
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Outcome
from ops.panel import recent_failures
from pool.nodes import Capacity, register
from tests.factories import submit_job
from tests.isolation.test_page import judged  # noqa: F401 (a fixture)
from tests.ops.conftest import released_job


@pytest.fixture
def op(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def node(db):
    return register("n1", Capacity(cpu_ids=[0, 1, 2, 3], memory_mb=4096, gpu_ids=[]), now=timezone.now())


@pytest.fixture
def probe_failures(node):
    """Two probe jobs that ended as probes do (inodes must fail, memory must run out), as the system team."""
    user, team = system_identity()
    return [
        released_job(user, team, name="isolation probe inodes on n1 (runc)", outcome=Outcome.FAILED, exit_code=1),
        released_job(user, team, name="isolation probe memory on n1 (runc)", outcome=Outcome.OUT_OF_MEMORY),
    ]


def test_probe_jobs_are_told_apart_by_the_system_team(probe_failures, member, team):
    mine = released_job(member, team, name="a team's own", outcome=Outcome.FAILED, exit_code=3)

    assert set(Job.objects.filter(PROBE_JOBS)) == set(probe_failures)
    failures, count = recent_failures(now=timezone.now())
    assert (failures, count) == ([mine], 1)


def test_the_panel_counts_teams_failures_without_the_probes_and_the_probes_on_a_line_of_their_own(
    op,
    probe_failures,
    member,
    team,
    judged,  # noqa: F811
):
    released_job(member, team, name="red crashed", outcome=Outcome.FAILED, exit_code=3)
    judged.results.filter(probe="root").update(verdict=Verdict.INCONCLUSIVE)  # one of each verdict

    page = op.get("/operator/").content.decode()

    failures = page[page.index('id="failures-heading"') : page.index('id="teams-heading"')]
    assert "Teams' failures (24 h): 1</h2>" in failures
    assert "red crashed" in failures and "isolation probe" not in failures
    probes = failures[failures.index('id="probes-24h"') :].split("</p>")[0]
    assert "Isolation probes (24 h): 2 run, 1 failed, 1 inconclusive" in probes
    assert 'href="/isolation/"' in probes


def test_the_probe_line_counts_verdicts_judged_in_the_last_day(judged):  # noqa: F811
    now = timezone.now()
    assert probe_summary(now=now) == probe_summary(now=now, hours=24)
    summary = probe_summary(now=now)
    assert (summary.run, summary.failed, summary.inconclusive) == (2, 1, 0)

    ProbeResult.objects.filter(probe="network").update(at=now - timedelta(hours=25))

    summary = probe_summary(now=now)
    assert (summary.run, summary.failed) == (1, 0)


def test_rows_are_links_to_the_job_and_the_node(op, member, team, outsider, other_team, node, image):
    crashed = released_job(outsider, other_team, name="blue crashed", outcome=Outcome.FAILED, exit_code=2)
    running = submit_job(member, team, image=image, name="red running", cpus=1)
    waiting = submit_job(member, team, image=image, name="red waiting", cpus=4)
    schedule_pass(now=timezone.now())

    page = op.get("/operator/").content.decode()

    failures = page[page.index('id="failures-heading"') :]
    assert f'<a href="/admin/jobs/job/{crashed.pk}/change/"><strong>blue crashed</strong></a>' in failures
    held = page[page.index('id="running-heading"') : page.index('id="queue-heading"')]
    assert f'href="/admin/jobs/job/{running.pk}/change/">red running</a>' in held
    assert '<a href="/operator/nodes/n1/">n1</a>' in held
    queued = page[page.index('id="queue-heading"') : page.index('id="lost-heading"')]
    assert f'href="/admin/jobs/job/{waiting.pk}/change/">red waiting</a>' in queued
    assert 'id="node-link-n1" href="/operator/nodes/n1/"' in page
    # An operator outside the team cannot open the team's job page, but the link leads to the job.
    assert op.get(f"/jobs/{crashed.pk}/").status_code == 404
    admin = op.get(f"/admin/jobs/job/{crashed.pk}/change/")
    assert admin.status_code == 200 and "blue crashed" in admin.content.decode()


def test_the_node_page_shows_its_card_running_jobs_and_history(op, operator, member, team, node, image):
    running = submit_job(member, team, image=image, name="red running", cpus=2)
    schedule_pass(now=timezone.now())
    op.post("/operator/nodes/n1/drain/", {"reason": "disk replacement on Tuesday"})

    response = op.get("/operator/nodes/n1/")

    page = response.content.decode()
    assert response.status_code == 200
    assert "<h1>Node n1</h1>" in page and "cores: 2 used, 2 free of 4" in page
    assert f'href="/admin/jobs/job/{running.pk}/change/">red running</a>' in page
    history = page[page.index('id="history-heading"') :]
    assert "active → draining" in history and operator.username in history
    assert "disk replacement on Tuesday" in history


def test_the_node_page_is_for_operators_and_known_nodes(client, op, member, node):
    assert op.get("/operator/nodes/nope/").status_code == 404
    client.force_login(member)
    assert client.get("/operator/nodes/n1/").status_code == 404
