"""The submit form in Debian's Chromium, through the live server: the worst case there from the first load
(and on resubmit) and following a time limit typed with units; a request no node can hold, a memory
that is not a number and the files to choose again said at their fields and in the summary; a script
box submitted as the job's argv; axe-core finds no serious violation on the form or its errors."""

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from jobs.models import Job
from pool.nodes import Capacity, register
from tests.e2e.screens import check_screen
from tests.e2e.test_ops_screens import log_in
from tests.factories import RuntimeImageFactory, submit_job

pytestmark = [pytest.mark.browser]


@pytest.fixture
def pool(transactional_db):
    """One image, and one node of 2 cpus, 4096 MB and no gpu."""
    register("small", Capacity(cpu_ids=[0, 1], memory_mb=4096, gpu_ids=[]), now=timezone.now())
    return RuntimeImageFactory()


def estimate(page) -> str:
    return page.locator("#estimate").inner_text()


def test_the_worst_case_is_there_from_the_start_and_follows_a_time_limit_with_units(pool, member, live_server, context):
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)
    page.goto(f"{base}/jobs/new/")

    # The defaults' worst case, with no change made yet.
    expect(page.locator("#estimate")).to_contain_text("Worst case:")
    check_screen(page, "submit-form")

    limit = page.get_by_label("Time limit")
    with page.expect_response(re.compile(r"/jobs/estimate/\?.*time_limit_s=5400")):
        limit.fill("5400")
        limit.press("Tab")
    expect(page.locator("#estimate")).to_contain_text("(1 h 31 m in all)")
    in_seconds = estimate(page)
    with page.expect_response(re.compile(r"/jobs/estimate/\?.*time_limit_s=90m")):
        limit.fill("90m")
        limit.press("Tab")
    expect(page.locator("#estimate")).to_have_text(in_seconds)
    with page.expect_response(re.compile(r"/jobs/estimate/\?.*time_limit_s=2h")):
        limit.fill("2h")
        limit.press("Tab")
    expect(page.locator("#estimate")).to_contain_text("(2 h 01 m in all)")
    assert context.csp_violations == []


def test_the_resubmit_form_shows_the_earlier_jobs_worst_case(pool, member, team, live_server, context):
    earlier = submit_job(member, team, image=pool, name="convert", cpus=2, memory_mb=512, time_limit_s=5400)
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)

    page.goto(f"{base}/jobs/{earlier.pk}/resubmit/")

    expect(page.get_by_role("heading", name="Submit again: convert")).to_be_visible()
    expect(page.locator("#estimate")).to_contain_text("(1 h 31 m in all)")


def test_the_errors_say_what_is_wrong_at_each_field_and_which_files_to_choose_again(
    pool, member, live_server, context, tmp_path
):
    (tmp_path / "job.py").write_bytes(b"x" * 1229)
    (tmp_path / "data.csv").write_bytes(b"y" * 40 * 1024)
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)
    page.goto(f"{base}/jobs/new/")

    page.get_by_label("Name").fill("too big")
    page.get_by_label("Command").fill("python3 /data/job.py")
    page.get_by_label("CPUs").fill("999")
    page.get_by_label("Memory (MB)").fill("abc")  # a text box: the browser sends what was typed
    page.get_by_label("Data files").set_input_files([tmp_path / "job.py", tmp_path / "data.csv"])
    with page.expect_response(f"{base}/jobs/new/") as response_info:
        page.get_by_role("button", name="Submit job").click()
    assert response_info.value.status == 400

    summary = page.get_by_role("alert")
    expect(summary).to_be_focused()
    expect(summary.get_by_role("link")).to_have_text(["CPUs", "Memory (MB)", "Data files"])
    expect(page.locator("#id_cpus_error")).to_have_text("Can never be held: the largest node has 2.")
    expect(page.locator("#id_memory_mb_error")).to_have_text("Enter a whole number of MB, such as 512.")
    again = "Choose again: job.py (1.2 KB), data.csv (40.0 KB) — a browser cannot keep chosen files across an error."
    expect(summary).to_contain_text(again)
    expect(page.locator("#data-again")).to_have_text(again)
    expect(page.get_by_label("Memory (MB)")).to_have_value("abc")
    check_screen(page, "submit-form-errors")
    assert not Job.objects.exists()
    assert context.csp_violations == []


def test_a_script_typed_in_the_script_box_is_the_jobs_argv(pool, member, live_server, context):
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)
    page.goto(f"{base}/jobs/new/")

    page.get_by_label("Name").fill("a script")
    page.get_by_label("Command").fill("true")
    page.get_by_label("Script").fill("#!/usr/bin/env python3\nfor i in range(3):\n    print(i)\n")
    with page.expect_response(f"{base}/jobs/new/"):
        page.get_by_role("button", name="Submit job").click()
    # The errors are swapped in by htmx, and the summary focused once they have settled: only then is the
    # form on the page the one to change (a field filled before would be replaced with the answer's).
    expect(page.get_by_role("alert")).to_be_focused()
    expect(page.locator("#id_script_error")).to_have_text("Give a command or a script, not both: empty one of them.")

    page.get_by_label("Command").fill("")
    page.get_by_role("button", name="Submit job").click()

    expect(page).to_have_url(re.compile(rf"^{re.escape(base)}/jobs/[0-9a-f-]{{36}}/$"))
    # The browser sent the box's lines as CRLF: the job runs them as typed.
    assert Job.objects.get().command == ["python3", "-c", "#!/usr/bin/env python3\nfor i in range(3):\n    print(i)"]
    assert context.csp_violations == []


def test_a_form_sent_by_the_keyboard_comes_back_with_its_errors_and_no_policy_violation(
    pool, member, live_server, context
):
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)
    page.goto(f"{base}/jobs/new/")

    page.get_by_label("Name").fill("too big")
    page.get_by_label("Command").fill("echo hi")
    cpus = page.get_by_label("CPUs")
    cpus.fill("999")
    with page.expect_response(f"{base}/jobs/new/") as response_info:
        cpus.press("Enter")  # sent from the keyboard, as a person who never reaches for the mouse
    assert response_info.value.status == 400

    expect(page.get_by_role("alert")).to_be_focused()
    expect(page.locator("#id_cpus_error")).to_have_text("Can never be held: the largest node has 2.")
    page.keyboard.press("Tab")
    assert context.csp_violations == []
    assert not Job.objects.exists()
