"""The submit form's "More" section in Debian's Chromium, through the live server: folded at first, opened to
declare an array of four tasks at most two running, which lands on the array's page; bad indices come back
with the section open and the error at the field; axe-core finds no serious violation with it open."""

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from jobs.models import Job, JobArray
from pool.nodes import Capacity, register
from tests.e2e.screens import check_screen
from tests.e2e.test_ops_screens import log_in
from tests.factories import RuntimeImageFactory

pytestmark = [pytest.mark.browser]


@pytest.fixture
def pool(transactional_db):
    """One image, and one node of 2 cpus, 4096 MB and no gpu."""
    register("small", Capacity(cpu_ids=[0, 1], memory_mb=4096, gpu_ids=[]), now=timezone.now())
    return RuntimeImageFactory()


def test_an_array_declared_under_more_lands_on_the_arrays_page(pool, member, live_server, context):
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)
    page.goto(f"{base}/jobs/new/")

    more = page.locator("details#more")
    expect(more).not_to_have_attribute("open", "")
    expect(page.get_by_label("Array indices")).to_be_hidden()
    page.get_by_label("Name").fill("sweep")
    page.get_by_label("Command").fill("true")
    more.locator("summary").click()
    # The estimate is swapped whole after each change: a change made while it is being swapped is not seen.
    page.wait_for_load_state("networkidle")
    page.get_by_label("Array indices").fill("0-3")
    with page.expect_response(re.compile(r"/jobs/estimate/\?.*indices=0-3")):
        page.get_by_label("At most running").fill("2")  # leaving the indices' box is their change
    expect(page.locator("#estimate-tasks")).to_have_text("× 4 tasks")
    check_screen(page, "submit-form-more")
    page.get_by_role("button", name="Submit job").click()

    expect(page).to_have_url(re.compile(rf"^{re.escape(base)}/arrays/[0-9a-f-]{{36}}/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("sweep array of 4")
    expect(page.locator("#messages")).to_contain_text("Array sweep submitted: 4 tasks.")
    array = JobArray.objects.get()
    assert page.url == f"{base}/arrays/{array.pk}/"
    assert (array.name, array.size, array.max_running) == ("sweep", 4, 2)
    assert sorted(Job.objects.filter(array=array).values_list("array_index", flat=True)) == [0, 1, 2, 3]
    assert context.csp_violations == []


def test_bad_indices_come_back_with_more_open_and_the_error_at_the_field(pool, member, live_server, context):
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)
    page.goto(f"{base}/jobs/new/")

    page.get_by_label("Name").fill("sweep")
    page.get_by_label("Command").fill("true")
    page.locator("details#more summary").click()
    page.get_by_label("Array indices").fill("5-1")
    page.get_by_label("At most running").fill("2")
    with page.expect_response(f"{base}/jobs/new/") as response_info:
        page.get_by_role("button", name="Submit job").click()
    assert response_info.value.status == 400

    expect(page.locator("details#more")).to_have_attribute("open", "")
    expect(page.locator("#id_indices_error")).to_have_text("'5-1': a range runs from the lower index to the higher.")
    expect(page.get_by_role("alert").get_by_role("link")).to_have_text(["Array indices"])
    expect(page.get_by_label("At most running")).to_have_value("2")
    assert not Job.objects.exists()
    assert context.csp_violations == []
