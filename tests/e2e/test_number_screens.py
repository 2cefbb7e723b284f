"""Numbers as people read them, in Debian's Chromium through the live server: the pool's utilisation by
default up to now in percent with its chart, a team's usage and statement in money and durations; each
screen photographed at desktop and phone width and checked with axe-core, under the site's CSP."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from jobs.models import Outcome
from pool.nodes import Capacity, register
from tests.e2e.screens import check_screen
from tests.e2e.test_ops_screens import log_in
from tests.ops.conftest import released_job

pytestmark = [pytest.mark.browser]


@pytest.fixture
def node(transactional_db):
    return register(
        "n1", Capacity(cpu_ids=[0, 1, 2, 3], memory_mb=8192, gpu_ids=[]), now=timezone.now() - timedelta(days=2)
    )


def test_the_utilisation_page_shows_today_in_percent_with_a_chart(
    transactional_db, operator, member, team, node, live_server, context
):
    released_job(member, team, name="today", cpus=2, held_for=timedelta(minutes=30))
    base = live_server.url
    page = context.new_page()
    log_in(page, base, operator.username)

    page.goto(f"{base}/accounting/statements/")
    page.get_by_role("link", name="Pool utilisation").click()

    expect(page).to_have_url(f"{base}/accounting/utilisation/")
    expect(page.locator("#overall strong")).to_have_text(re.compile(r"^\d+(\.\d)? %$"))
    expect(page.locator("#overall")).not_to_contain_text("0.0 held")
    expect(page.locator("#utilisation-chart")).to_be_visible()
    expect(page.locator("#utilisation-chart text.axis").last).not_to_have_text("—")
    expect(page.get_by_role("cell", name="n1", exact=True)).to_be_visible()
    check_screen(page, "utilisation")

    page.get_by_label("Step").select_option("hour")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#utilisation-chart")).to_be_visible()
    assert "—" not in page.locator("table").last.inner_text()  # no hour yet to come
    check_screen(page, "utilisation-hourly")
    assert context.csp_violations == []


def test_usage_and_the_statement_say_money_and_durations(transactional_db, member, team, node, live_server, context):
    released_job(
        member, team, name="ran out", outcome=Outcome.OUT_OF_MEMORY, exit_code=137, held_for=timedelta(minutes=3)
    )
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)

    page.goto(f"{base}/usage/")
    expect(page.locator("#total-cost")).to_have_text(re.compile(r"^(\d+\.\d\d|less than 0\.01) EUR$"))
    expect(page.locator("#total-held")).to_have_text("3 m 00 s")
    expect(page.locator("table.usage")).to_contain_text("out of memory")
    check_screen(page, "usage-numbers")

    page.goto(f"{base}/accounting/statements/")
    page.get_by_role("link", name="statement", exact=True).first.click()
    expect(page.locator("table.statement-lines")).to_contain_text("3 m 00 s")
    expect(page.locator("table.statement-lines")).to_contain_text("out of memory")
    check_screen(page, "statement")
    assert context.csp_violations == []
