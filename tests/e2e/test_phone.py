"""The site on a phone (390×844): the bar is one line with a menu that opens without a script, no page scrolls
sideways, and the charts' labels stay readable (11 px or more)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from pool.nodes import Capacity, register
from tests.e2e.test_ops_screens import log_in
from tests.factories import submit_job
from tests.ops.conftest import released_job

pytestmark = [pytest.mark.browser]

PHONE = {"width": 390, "height": 844}
PAGES = ["/", "/jobs/", "/jobs/new/", "/templates/", "/schedules/", "/usage/", "/accounting/statements/",
         "/isolation/", "/account/", "/account/webhooks/"]  # fmt: skip
SMALLEST_CHART_TEXT = """() => Math.min(...[...document.querySelectorAll('svg.chart-svg text')].map(
  t => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a))"""


@pytest.fixture
def pool_with_a_day(transactional_db, member, team):
    register("n1", Capacity(cpu_ids=[0, 1], memory_mb=4096, gpu_ids=[]), now=timezone.now() - timedelta(days=1))
    released_job(member, team, name="nightly", held_for=timedelta(minutes=30))


def test_the_phones_bar_is_one_line_and_its_menu_opens_without_a_script(pool_with_a_day, member, live_server, context):
    page = context.new_page()
    page.set_viewport_size(PHONE)
    log_in(page, live_server.url, member.username)
    page.goto(f"{live_server.url}/jobs/")

    bar = page.locator("header.top").bounding_box()
    assert bar is not None and bar["height"] <= 56
    menu = page.get_by_role("navigation", name="Site menu")
    isolation = menu.get_by_role("link", name="Isolation", exact=True)
    expect(isolation).to_be_hidden()
    menu.get_by_text("Menu", exact=True).click()
    isolation.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Isolation")
    assert context.csp_violations == []


def test_no_page_scrolls_sideways_on_a_phone(pool_with_a_day, member, live_server, context):
    page = context.new_page()
    page.set_viewport_size(PHONE)
    log_in(page, live_server.url, member.username)
    wide = {}
    for path in PAGES:
        page.goto(f"{live_server.url}{path}")
        width = page.evaluate("() => document.documentElement.scrollWidth")
        if width > PHONE["width"]:
            wide[path] = width
    assert wide == {}
    assert context.csp_violations == []


def test_chart_labels_stay_11_px_or_more_on_a_phone(pool_with_a_day, operator, live_server, context):
    page = context.new_page()
    page.set_viewport_size(PHONE)
    log_in(page, live_server.url, operator.username)
    for path in ["/usage/", "/operator/"]:
        page.goto(f"{live_server.url}{path}")
        expect(page.locator("svg.chart-svg text").first).to_be_attached()
        assert page.evaluate(SMALLEST_CHART_TEXT) >= 11, path
        assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"], path
    assert context.csp_violations == []


def test_the_operators_queue_shows_why_and_when_on_a_phone(
    pool_with_a_day, member, team, operator, live_server, context
):
    submit_job(member, team, name="too big", cpus=2, memory_mb=8192)  # more than n1 lends: it waits
    page = context.new_page()
    page.set_viewport_size(PHONE)
    log_in(page, live_server.url, operator.username)
    page.goto(f"{live_server.url}/operator/")

    row = page.locator("#queue tbody tr").filter(has_text="too big")
    for label in ["Why", "Expected start"]:  # within the phone's width, not in a table scrolled sideways
        cell = row.locator(f'td[data-label="{label}"]')
        expect(cell).to_be_visible()
        box = cell.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], label
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    assert context.csp_violations == []
