"""A job that ran out of memory, resubmitted in Debian's Chromium as a person does it: the form proposes twice the
memory and says why beside the field; the two job pages link each other; once the new job succeeded, the morning
review says the failure is fixed by it and puts it after the open ones. At desktop and phone width, each screen
checked with axe-core.

The new job is moved to its success by the domain's actions in this process (no worker, no containers), as
tests/e2e/test_dashboard.py does: what is tested is the pages."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from accounting.meter import Usage
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Outcome, Stage
from pool.nodes import Capacity, register
from tests.e2e.screens import WIDTHS, check_screen
from tests.e2e.test_browser import log_in
from tests.factories import RuntimeImageFactory, ended_job, run_to_release

pytestmark = [pytest.mark.browser]


@pytest.fixture
def night(transactional_db, member, team):
    """On a node of 4096 MB: "big join" ran out of its 64 MB an hour ago; "nightly load" failed an hour before."""
    register("n1", Capacity(cpu_ids=[0, 1], memory_mb=4096, gpu_ids=[]), now=timezone.now())
    image = RuntimeImageFactory(description="BusyBox: sh and the usual tools")
    now = timezone.now()
    ended_job(member, team, outcome=Outcome.FAILED, at=now - timedelta(hours=2), name="nightly load", image=image,
              exit_code=1, reason="exit code 1", usage=Usage(cpu_seconds=30.0, memory_peak_mb=8))  # fmt: skip
    return ended_job(member, team, outcome=Outcome.OUT_OF_MEMORY, at=now - timedelta(hours=1), name="big join",
                     image=image, memory_mb=64, exit_code=137, reason="killed by the memory limit",
                     usage=Usage(cpu_seconds=30.0, memory_peak_mb=64))  # fmt: skip


@pytest.mark.parametrize("width", list(WIDTHS))
def test_a_job_out_of_memory_resubmitted_with_more_is_linked_both_ways_and_fixes_the_failure(
    night, member, live_server, context, width
):
    base = live_server.url
    page = context.new_page()
    page.set_viewport_size(dict(zip(("width", "height"), WIDTHS[width], strict=True)))
    log_in(page, base, member.username)
    # The review's failures, the latest first: "big join" is open, before "nightly load".
    failures = page.locator("#ended > li.failure .job-link")
    expect(failures).to_have_text(["big join", "nightly load"])
    expect(page.locator(".fixed-by")).to_have_count(0)

    # The failed job's page: its Resubmit proposes twice the memory it ran out at, and says why by the field.
    failures.first.click()
    expect(page.get_by_role("heading", name="big join", exact=True)).to_be_visible()
    expect(page.locator("#outcome")).to_have_text("out of memory")
    expect(page.locator("#resubmitted-as")).to_have_count(0)
    page.get_by_role("link", name="Resubmit", exact=True).click()
    expect(page.get_by_role("heading", name="Submit again: big join")).to_be_visible()
    memory = page.get_by_label("Memory (MB)")
    why = "It ran out of memory at 64 MB; 128 MB proposed."
    expect(memory).to_have_value("128")
    expect(memory).to_have_accessible_description(re.compile(re.escape(why)))  # read with the field
    expect(page.locator(".field-memory_mb small")).to_have_text(why)  # and shown beside it
    check_screen(page, "resubmit-out-of-memory")
    page.get_by_label("Name").fill("big join, more memory")
    page.get_by_role("button", name="Submit job").click()

    # The new job's page names the job it resubmits, linked.
    expect(page).to_have_url(re.compile(rf"^{re.escape(base)}/jobs/[0-9a-f-]{{36}}/$"))
    expect(page.locator("#messages")).to_contain_text("Submitted again as a new job (from big join).")
    again = Job.objects.get(name="big join, more memory")
    assert (again.memory_mb, again.resubmitted_from_id, again.stage) == (128, night.pk, Stage.SUBMIT)
    resubmit_of = page.locator("#resubmit-of")
    expect(resubmit_of).to_have_text("Resubmit of big join")
    expect(resubmit_of.get_by_role("link", name="big join")).to_have_attribute("href", f"/jobs/{night.pk}/")

    # The new job runs and succeeds (the scheduler and its node, here in the test).
    schedule_pass()
    again.refresh_from_db()
    run_to_release(again, now=timezone.now(), usage=Usage(cpu_seconds=20.0, memory_peak_mb=100))
    page.reload()
    expect(page.locator("#outcome")).to_have_text("succeeded")
    expect(resubmit_of).to_have_text("Resubmit of big join")
    check_screen(page, "resubmit-succeeded")

    # Back to the failed job by that link: it says what it was resubmitted as, linked to the new job.
    resubmit_of.get_by_role("link", name="big join").click()
    expect(page).to_have_url(f"{base}/jobs/{night.pk}/")
    resubmitted_as = page.locator("#resubmitted-as")
    expect(resubmitted_as).to_have_text(re.compile(r"^Resubmitted as big join, more memory on \S+ \d\d:\d\d$"))
    link = resubmitted_as.get_by_role("link", name="big join, more memory")
    expect(link).to_have_attribute("href", f"/jobs/{again.pk}/")
    expect(page.locator("#resubmit-of")).to_have_count(0)
    check_screen(page, "resubmitted-failure")

    # The review: "big join" fixed by the new job, after the open failure; its link goes to the new job.
    page.goto(f"{base}/")
    expect(failures).to_have_text(["nightly load", "big join"])
    fixed = page.locator("#ended > li.failure.fixed")
    expect(fixed).to_have_count(1)
    expect(fixed.locator(".job-link")).to_have_text("big join")
    expect(fixed.locator(".fixed-by")).to_have_text("fixed by big join, more memory")
    expect(page.locator("#ended > li.failure:not(.fixed) .fixed-by")).to_have_count(0)
    expect(page.locator("#ended > li.ended-line .job-link")).to_have_text(["big join, more memory"])
    check_screen(page, "review-fixed")
    fixed.locator(".fixed-by").get_by_role("link", name="big join, more memory").click()
    expect(page).to_have_url(f"{base}/jobs/{again.pk}/")
    expect(page.get_by_role("heading", name="big join, more memory")).to_be_visible()
    assert context.csp_violations == []
