"""The operator panel, usage and job templates in Debian's Chromium, through the live server: drain after a
confirmation, a lost node shown by the page's polling within seconds, a job submitted from a template, a job
saved as a template, the usage CSV downloaded; each screen photographed at desktop and phone width and
checked with axe-core (no serious or critical violation), under the site's Content-Security-Policy."""

import csv
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from isolation.checks import system_identity
from jobs.models import Job, Outcome
from jobtemplates.models import JobTemplate
from pool.models import Node
from pool.nodes import Capacity, mark_lost_nodes, register
from tests.e2e.screens import check_screen
from tests.e2e.test_browser import PASSWORD
from tests.factories import RuntimeImageFactory
from tests.ops.conftest import released_job

pytestmark = [pytest.mark.browser]


def log_in(page, base: str, username: str) -> None:
    page.goto(f"{base}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).not_to_have_url(re.compile(r"/login/"))


@pytest.fixture
def nodes(transactional_db):
    now = timezone.now()
    return [
        register("n1", Capacity(cpu_ids=[0, 1, 2, 3], memory_mb=8192, gpu_ids=[]), now=now),
        register("n2", Capacity(cpu_ids=[0, 1], memory_mb=4096, gpu_ids=["g0"]), now=now),
    ]


def test_operator_drains_a_node_after_confirming_and_sees_a_lost_node_within_seconds(
    transactional_db,
    operator,
    member,
    team,
    outsider,
    other_team,
    nodes,
    live_server,
    context,  # noqa: F811
):
    released_job(outsider, other_team, name="blue crashed", outcome=Outcome.FAILED, exit_code=2, reason="exit 2")
    released_job(member, team, name="red fine", cpus=2, held_for=timedelta(hours=3))
    probe_user, probe_team = system_identity()
    released_job(probe_user, probe_team, name="isolation probe inodes on n1 (runc)", outcome=Outcome.FAILED)
    base = live_server.url
    page = context.new_page()
    log_in(page, base, operator.username)

    page.get_by_role("link", name="Operator", exact=True).click()
    expect(page).to_have_url(f"{base}/operator/")
    expect(page.get_by_role("heading", name="Operator panel")).to_be_visible()
    expect(page.locator("#failures-heading")).to_have_text("Teams' failures (24 h): 1")  # not the probe's
    expect(page.locator(".failures")).to_contain_text("blue crashed")
    expect(page.locator(".failures")).not_to_contain_text("isolation probe")
    expect(page.locator("#probes-24h")).to_contain_text("Isolation probes (24 h): 0 run, 0 failed")
    expect(page.locator(".failures a").first).to_have_attribute(
        "href", re.compile(r"^/admin/jobs/job/[0-9a-f-]{36}/change/$")
    )
    expect(page.locator("#utilisation title").first).to_contain_text("Cores in use")
    check_screen(page, "operator")

    page.locator("#drain-n1").focus()  # by keyboard: the link, then Enter
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{base}/operator/nodes/n1/drain/")
    expect(page.get_by_role("heading", name="Drain node n1?")).to_be_visible()
    assert Node.objects.get(name="n1").state == Node.State.ACTIVE  # nothing happens before the confirmation
    expect(page.locator("#running-now")).to_have_text("No job runs there now; no new job starts there")
    check_screen(page, "operator-confirm")
    page.get_by_role("button", name="Yes, drain n1").click()  # without a reason: refused, the field says why
    expect(page.locator("#id_reason_error")).to_contain_text("Say why it is drained")
    expect(page.get_by_label("Why drain it?")).to_have_attribute("aria-invalid", "true")
    check_screen(page, "operator-confirm-error")
    assert Node.objects.get(name="n1").state == Node.State.ACTIVE
    page.get_by_label("Why drain it?").fill("kernel upgrade")
    page.get_by_role("button", name="Yes, drain n1").click()

    expect(page).to_have_url(f"{base}/operator/")
    expect(page.locator(".messages")).to_contain_text("Node n1 drained")
    expect(page.locator("#node-n1")).to_have_attribute("data-state", "draining")
    expect(page.locator("#reason-n1")).to_have_text("Why: kernel upgrade")
    n1 = Node.objects.get(name="n1")
    assert (n1.state, n1.state_changed_by, n1.state_reason) == (Node.State.DRAINING, operator, "kernel upgrade")
    page.locator("#node-link-n1").click()
    expect(page).to_have_url(f"{base}/operator/nodes/n1/")
    expect(page.locator("table.history")).to_contain_text("kernel upgrade")
    check_screen(page, "operator-node")
    page.goto(f"{base}/operator/")

    # n2 stops heartbeating and the reaper declares it lost: the open page shows it by its polling alone.
    navigations = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url) if frame == page.main_frame else None)
    Node.objects.filter(name="n2").update(last_heartbeat=timezone.now() - timedelta(minutes=5))
    assert [n.name for n in mark_lost_nodes(now=timezone.now(), after=timedelta(seconds=30))] == ["n2"]
    expect(page.locator("#node-n2")).to_have_attribute("data-state", "offline", timeout=10_000)
    expect(page.locator("#node-n2")).to_contain_text("Lost: no heartbeat")
    assert navigations == []

    # The admin's records list fits a laptop screen: no sideways scrolling to see the cost.
    page.goto(f"{base}/admin/accounting/record/")
    expect(page.locator("#result_list")).to_contain_text("red fine")
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    assert context.csp_violations == []


def test_member_submits_a_job_from_a_template_and_saves_one_of_theirs(
    transactional_db,
    operator,
    member,
    team,
    nodes,
    live_server,
    context,  # noqa: F811
):
    image = RuntimeImageFactory(name="python", reference="e31/python:3", description="Python 3")
    template = JobTemplate.objects.create(
        name="retrain", description="The nightly retraining run.", image=image,
        command="python3 /data/train.py --epochs {epochs}", defaults={"epochs": "5"},
        cpus=1, cpus_max=2, memory_mb=256, memory_mb_max=1024, time_limit_s=600, created_by=operator,
    )  # fmt: skip
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)

    page.get_by_role("link", name="Templates", exact=True).click()
    expect(page).to_have_url(f"{base}/templates/")
    check_screen(page, "templates")
    page.get_by_role("link", name="retrain").click()
    expect(page).to_have_url(f"{base}/templates/{template.pk}/")
    check_screen(page, "template-run")

    page.get_by_label("epochs").fill("40")
    page.get_by_label("CPUs").fill("3")  # over the template's bound
    page.get_by_role("button", name="Submit job").click()
    expect(page.locator("#form-errors")).to_contain_text("less than or equal to 2")
    expect(page.get_by_label("epochs")).to_have_value("40")  # what was typed is kept
    page.get_by_label("CPUs").fill("2")
    page.get_by_role("button", name="Submit job").click()

    expect(page).to_have_url(re.compile(rf"^{re.escape(base)}/jobs/[0-9a-f-]{{36}}/$"))
    job = Job.objects.get()
    assert job.command == ["python3", "/data/train.py", "--epochs", "40"] and job.cpus == 2
    expect(page.locator(".messages")).to_contain_text("from the template retrain")

    page.goto(f"{base}/templates/")
    page.get_by_role("button", name="Save retrain as a template").click()
    expect(page.locator(".messages")).to_contain_text("Saved retrain as the template retrain of the team red")
    assert JobTemplate.objects.filter(team=team).count() == 1
    assert context.csp_violations == []


def test_member_reads_usage_and_downloads_it_as_csv(
    transactional_db,
    member,
    teammate,
    team,
    outsider,
    other_team,
    nodes,
    live_server,
    context,  # noqa: F811
):
    released_job(member, team, name="red good", cpus=2, held_for=timedelta(hours=2))
    released_job(teammate, team, name="red bad", outcome=Outcome.FAILED, exit_code=1)
    released_job(outsider, other_team, name="blue secret")
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)

    page.get_by_role("link", name="Usage", exact=True).click()
    expect(page).to_have_url(f"{base}/usage/")
    expect(page.locator("table.usage")).to_contain_text("red good")
    expect(page.locator("table.usage")).not_to_contain_text("blue secret")
    check_screen(page, "usage")

    page.get_by_text("Filter (the job list's, and when the jobs ended)").click()
    page.get_by_role("group", name="Outcome").get_by_role("checkbox", name="Failed", exact=True).check()
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(r"outcome=failed"))
    expect(page.locator("#total-jobs")).to_have_text("1")

    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download CSV").click()
    download = download_info.value
    assert re.fullmatch(r"usage-\d{8}-\d{4}\.csv", download.suggested_filename)
    rows = list(csv.DictReader(Path(download.path()).read_text().splitlines()))
    assert [(r["name"], r["outcome"], r["submitted_by"]) for r in rows] == [("red bad", "failed", "bob")]
    assert context.csp_violations == []
