"""/usage/ asked for a moment in Debian's Chromium, under a frozen morning: "since 18:00 yesterday" typed in the
form's day-and-time picker, read in the team's zone, selects the jobs and totals of that moment; the morning
review's cost is one click from the same figure on /usage/. No CSP violation; the new screen checked by axe-core.

Jobs are moved through their steps by the domain's actions in this process (no worker, no containers)."""

import re
import zoneinfo
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from playwright.sync_api import expect

from accounting.models import Record
from jobs.models import Outcome
from tests.e2e.screens import check_screen
from tests.e2e.test_browser import log_in
from tests.factories import RuntimeImageFactory, ended_job

pytestmark = [pytest.mark.browser]
PARIS = zoneinfo.ZoneInfo("Europe/Paris")
MORNING = datetime(2030, 3, 12, 8, 30, tzinfo=PARIS)
EVENING = datetime(2030, 3, 11, 18, 0, tzinfo=PARIS)


@pytest.fixture
def evening(transactional_db, member, team, outsider, other_team, local_node):
    """Jobs of the team (in Paris) submitted at 17:30, 18:30 and 23:00 the evening before, each run 10 minutes
    after a 2 minute wait; one of another team at 18:30."""
    team.time_zone = "Europe/Paris"
    team.save(update_fields=["time_zone"])
    image = RuntimeImageFactory()
    ran, waited = timedelta(minutes=10), timedelta(minutes=2)

    def job(user, of, name: str, submitted: datetime, **kwargs):
        return ended_job(user, of, outcome=Outcome.SUCCEEDED, at=submitted + waited + ran, name=name, image=image,
                         ran=ran, waited=waited, **kwargs)  # fmt: skip

    return {
        "before": job(member, team, "before six", EVENING - timedelta(minutes=30)),
        "after": job(member, team, "after six", EVENING + timedelta(minutes=30), cpus=2),
        "night": job(member, team, "at night", EVENING + timedelta(hours=5)),
        "other": job(outsider, other_team, "someone else's", EVENING + timedelta(minutes=30)),
    }


def exact(page, selector: str, pattern: str) -> Decimal:
    found = re.fullmatch(pattern, page.locator(selector).get_attribute("title") or "")
    assert found, page.locator(selector).get_attribute("title")
    return Decimal(found.group(1))


def test_usage_since_18_00_typed_in_the_form_selects_that_evenings_jobs_and_totals(
    evening, member, live_server, context
):
    base = live_server.url
    page = context.new_page()
    with time_machine.travel(MORNING, tick=True):
        log_in(page, base, member.username)
        page.goto(f"{base}/usage/")
        expect(page.locator("table.usage")).to_contain_text("before six")

        page.get_by_text("Filter (the job list's, and when the jobs ended)").click()
        since = page.get_by_label("Submitted from")
        expect(since).to_have_attribute("type", "datetime-local")
        since.fill("2030-03-11T18:00")
        page.get_by_role("button", name="Show").click()

        expect(page).to_have_url(re.compile(r"[?&]since=2030-03-11T18%3A00(&|$)"))
        jobs = page.locator("table.usage td[data-label=Job] a")
        # 17:30 in Paris is before 18:00 there; read as UTC, 18:00 would have left "after six" (17:30 UTC) out.
        expect(jobs).to_have_text(["at night", "after six"])
        expect(page.locator("#total-jobs")).to_have_text("2")
        records = Record.objects.filter(job__in=[evening["after"], evening["night"]])
        assert exact(page, "#total-cost", r"exact: ([0-9.]+)") == sum(r.cost for r in records)
        expect(page.get_by_label("Submitted from")).to_have_value("2030-03-11T18:00")  # shown as asked, in Paris
        expect(page.locator("#usage-chart title").first).to_have_text("Core-hours held per hour (core-hours)")
        expect(page.locator("#usage-chart rect.bar").first.locator("title")).to_have_text(
            "03-11 18:00: 0.33 core-hours"  # "after six": 2 cores for 10 minutes
        )
        check_screen(page, "usage-since")

        # An end before the start is said on the form, not a page of nothing.
        page.get_by_label("Submitted before").fill("2030-03-11T17:00")
        page.get_by_role("button", name="Show").click()
        expect(page.locator("#filter-errors")).to_contain_text(
            "Submitted before (until): Enter a moment after the one in “Submitted from”."
        )
    assert context.csp_violations == []


def test_the_reviews_cost_is_one_click_from_the_same_total_on_usage(evening, member, live_server, context):
    base = live_server.url
    page = context.new_page()
    with time_machine.travel(MORNING, tick=True):
        log_in(page, base, member.username)  # the review, since 18:00 yesterday
        cost = exact(page, "#night-sum .sum-cost", r"([0-9.]+) EUR exactly")

        page.locator("#night-cost").click()

        expect(page).to_have_url(re.compile(r"/usage/\?ended_since=2030-03-11T18%3A00%3A00%2B01%3A00$"))
        expect(page.locator("table.usage td[data-label=Job] a")).to_have_text(["at night", "after six"])
        assert exact(page, "#total-cost", r"exact: ([0-9.]+)") == cost > 0
        expect(page.get_by_label("Ended from")).to_have_value("2030-03-11T18:00")
    assert context.csp_violations == []
