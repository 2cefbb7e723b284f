"""The job page in Debian's Chromium at 1366x900 and 390x844: a running job's log in the first screen, each
step's duration under its own step, the step a failed job ended at marked, numbered and searchable log lines,
the keyboard focus kept on a polled link across polls (also on the job list), and the clocks written as the
server writes durations.

Jobs are moved through their steps by the domain's actions in this process (no worker, no containers)."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from core import formats
from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Outcome
from jobs.storage import logs
from tests.e2e.screens import SCREENS, check_screen
from tests.e2e.test_browser import log_in
from tests.factories import RuntimeImageFactory, ended_job, submit_job

pytestmark = [pytest.mark.browser]
SIZES = {"desktop": (1366, 900), "phone": (390, 844)}
# The top of the log's box, and how much of it the first screen shows.
LOG_IN_FIRST_SCREEN = """() => { const box = document.querySelector('.log-scroll').getBoundingClientRect();
  return [box.top, Math.min(box.bottom, innerHeight) - box.top]; }"""


@pytest.fixture
def image(transactional_db):
    return RuntimeImageFactory(description="BusyBox: sh and the usual tools")


def running_job(member, team, image, lines: int = 300, **request) -> Job:
    job = submit_job(member, team, image=image, name="chatty", time_limit_s=600,
                     command=["sh", "-c", "set -e\necho starting export\npython3 /data/train.py --epochs 300\n"],
                     **request)  # fmt: skip
    schedule_pass()
    job.refresh_from_db()
    assert actions.start_run(job, now=timezone.now())
    data = b"".join(f"epoch {i}: loss {1 / (i + 1):.4f}\n".encode() for i in range(lines))
    logs.append(job.pk, 0, data)
    return job


# Counts, in window.__polls, the polls of a path the page has swapped in and settled. htmx fires afterSettle once
# per swapped element (a poll's target and each out-of-band part), so a poll counts once, by its request; on
# window, so e31.js's own afterSettle handler (on document) has put the focus back before it counts.
COUNT_POLLS = """path => { window.__polls = 0; const seen = new WeakSet();
  window.addEventListener('htmx:afterSettle', e => {
    const xhr = e.detail.xhr;
    if (!xhr || seen.has(xhr) || !e.detail.pathInfo.requestPath.includes(path)) return;
    seen.add(xhr); window.__polls += 1; }); }"""


def count_polls(page, path: str) -> None:
    page.evaluate(COUNT_POLLS, path)


def wait_for_polls(page, n: int, timeout: float) -> None:
    """Waits until `n` polls more than now have been swapped in and settled, failing after `timeout` ms."""
    page.evaluate("() => { window.__polls = 0; }")
    page.wait_for_function(f"() => window.__polls >= {n}", timeout=timeout)


# The page's clock format against the server's, in seconds: each switch of unit, a half up, a negative span.
DURATIONS = [0, 0.4, 0.5, 2.5, 45, 59.5, 166, 3599, 3600, 3900, 86399, 86400, 30 * 3600, 3 * 86400 + 4 * 3600,
             1000 * 86400, -3]  # fmt: skip


def test_a_running_jobs_page_shows_the_log_in_the_first_screen_with_its_clock(member, team, image, local_node,
                                                                              live_server, context,
                                                                              transactional_db):  # fmt: skip
    job = running_job(member, team, image)
    Job.objects.filter(pk=job.pk).update(
        usage_now={"cpu_percent": 87.0, "memory_mb": 41, "at": timezone.now().isoformat()}
    )
    page = context.new_page()
    log_in(page, live_server.url, member.username)

    for label, (width, height) in SIZES.items():
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{live_server.url}/jobs/{job.pk}/")
        expect(page.locator("#log")).to_contain_text("epoch 299")
        page.screenshot(path=str(SCREENS / f"job-running-first-screen-{label}.png"))
        top, shown = page.evaluate(LOG_IN_FIRST_SCREEN)
        assert top < height and shown >= 80, f"{label}: the log starts at {top} px, {shown} px of it in view"

    expect(page.locator("#elapsed")).to_have_text(re.compile(r"^\d+ s$"))
    elapsed = int(page.locator("#elapsed").inner_text().split()[0])
    page.wait_for_function(f"() => parseInt(document.querySelector('#elapsed').textContent) > {elapsed}")  # ticks
    expect(page.locator("#remaining")).to_have_text(re.compile(r"^9 m \d\d s$"))
    expect(page.locator("#usage-now")).to_have_text(re.compile(r"cpu 87 % of 1 cpu · memory 41 of \d+ MB · sampled"))
    expect(page.locator(".steps li[data-step=rent] .took")).to_have_text(re.compile(r"^queue wait (\d+|< 1) s$"))
    expect(page.locator(".steps li[data-step=run] .took")).to_have_text(re.compile(r"^run time \d+ s so far$"))
    expect(page.locator("#command")).to_have_text("sh -c ‹script below›")
    expect(page.locator("#script-1 li")).to_have_text(
        ["set -e", "echo starting export", "python3 /data/train.py --epochs 300"]
    )
    check_screen(page, "job-running-page")
    assert context.csp_violations == []


def test_the_focused_log_link_keeps_the_focus_over_three_polls(member, team, image, local_node, live_server, context,
                                                               transactional_db):  # fmt: skip
    job = running_job(member, team, image)
    page = context.new_page()
    page.set_viewport_size({"width": 1366, "height": 900})
    log_in(page, live_server.url, member.username)
    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    count_polls(page, "/log/lines/")

    link = page.get_by_role("link", name="full log (text)")
    link.focus()
    page.evaluate("() => { document.activeElement.__before_the_polls = true; }")
    wait_for_polls(page, 3, timeout=10_000)  # one a second

    focused = page.evaluate("""() => { const el = document.activeElement;
      return [el.tagName, el.textContent, !!el.__before_the_polls, el.isConnected, !!el.closest('#log-poller')]; }""")
    # The link was replaced by each poll (a new element), and the focus is on the new one, not on <body>.
    assert focused == ["A", "full log (text)", False, True, True], focused
    assert context.csp_violations == []


def test_a_focused_row_link_of_the_polled_job_list_keeps_the_focus_over_three_polls(member, team, image, local_node,
                                                                                    live_server, context,
                                                                                    transactional_db):  # fmt: skip
    job = running_job(member, team, image, lines=1)
    page = context.new_page()
    log_in(page, live_server.url, member.username)
    page.goto(f"{live_server.url}/jobs/")
    count_polls(page, "/jobs/")

    row_link = page.locator(f'#job-rows a[href="/jobs/{job.pk}/"]').first
    row_link.focus()
    page.evaluate("() => { document.activeElement.__before_the_polls = true; }")
    wait_for_polls(page, 3, timeout=30_000)  # one every five seconds

    focused = page.evaluate("""() => { const el = document.activeElement;
      return [el.tagName, el.getAttribute('href'), !!el.__before_the_polls, el.isConnected,
              !!el.closest('#job-rows')]; }""")
    # The rows were replaced by each poll, and the focus is on the same job's new link, not on <body> (htmx
    # finds it by its id; without one, e31.js finds it by its href).
    assert focused == ["A", f"/jobs/{job.pk}/", False, True, True], focused
    assert context.csp_violations == []


def test_the_pages_clocks_write_a_duration_exactly_as_the_server_does(live_server, context, transactional_db):
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")  # every page has e31.js, the clocks' script

    written = page.evaluate("values => values.map(value => window.e31.duration(value))", DURATIONS)
    assert dict(zip(DURATIONS, written, strict=True)) == {value: formats.duration(value) for value in DURATIONS}
    assert formats.duration(30 * 3600) == "1 d 6 h"  # days from 24 h, on the page as on the server


def test_log_lines_are_numbered_linkable_and_searchable_with_appended_lines_too(member, team, image, local_node,
                                                                                live_server, context,
                                                                                transactional_db):  # fmt: skip
    job = running_job(member, team, image)
    page = context.new_page()
    page.set_viewport_size({"width": 1366, "height": 900})
    log_in(page, live_server.url, member.username)
    page.goto(f"{live_server.url}/jobs/{job.pk}/#L120")

    line = page.locator("#L120")
    expect(line).to_have_text("epoch 119: loss 0.0083\n")  # the number is the anchor's CSS content, not text
    assert page.evaluate("() => document.querySelector('#L120').matches(':target')")
    assert page.evaluate("""() => { const box = document.querySelector('.log-scroll').getBoundingClientRect();
      const r = document.querySelector('#L120').getBoundingClientRect();
      return r.top >= box.top - 1 && r.bottom <= box.bottom + 1; }"""), "line 120 is scrolled into the log's view"
    assert page.evaluate("() => getComputedStyle(document.querySelector('#L120 .ln'), '::before').content") == '"120"'

    search = page.get_by_role("searchbox", name="Find in the log")
    search.fill("LOSS 0.003")  # any case
    count = page.locator("#log-search-count")
    n = sum(f"loss {1 / (i + 1):.4f}".startswith("loss 0.003") for i in range(300))
    expect(count).to_have_text(f"1 of {n}")
    page.get_by_role("button", name="Next match").click()
    expect(count).to_have_text(f"2 of {n}")
    search.press("Shift+Enter")
    expect(count).to_have_text(f"1 of {n}")
    assert page.evaluate("() => CSS.highlights.get('log-match').size") == n

    offset = logs.end(job.pk)
    logs.append(job.pk, offset, b"epoch 300: loss 0.0033\n")
    expect(page.locator("#L301")).to_have_text("epoch 300: loss 0.0033\n")  # numbered on by the poller
    expect(count).to_have_text(f"1 of {n + 1}")  # the appended line searched too
    page.get_by_role("button", name="Previous match").click()
    expect(count).to_have_text(f"{n + 1} of {n + 1}")
    assert context.csp_violations == []


@pytest.mark.parametrize(
    ("outcome", "extra", "red"),
    [
        (Outcome.FAILED, {"exit_code": 3, "reason": "exit code 3"}, "run"),
        (Outcome.FAILED, {"exit_code": 0, "reason": "over the store quota of team red"}, "output"),
        (Outcome.CANCELLED, {"ran": timedelta(0)}, "rent"),
    ],
)
def test_an_ended_jobs_page_shows_each_steps_duration_and_marks_the_step_it_ended_at(member, team, image, local_node,
                                                                                     live_server, context,
                                                                                     transactional_db, outcome,
                                                                                     extra, red):  # fmt: skip
    extra = {"ran": timedelta(seconds=20), **extra}
    job = ended_job(member, team, outcome=outcome, at=timezone.now(), image=image, name="ended", **extra,
                    log=b"ERROR: upstream table missing\n" if extra["ran"] else b"")  # fmt: skip
    Job.objects.filter(pk=job.pk).update(failure_excerpt="ERROR: upstream table missing" if extra["ran"] else "")
    page = context.new_page()
    log_in(page, live_server.url, member.username)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server.url}/jobs/{job.pk}/")

    expect(page.locator(".steps li.ended")).to_have_count(1)
    expect(page.locator(f".steps li.ended[data-step={red}]")).to_contain_text(f"{outcome} here")
    assert page.evaluate(
        "() => getComputedStyle(document.querySelector('.steps li[data-step=release]')).borderTopColor"
    ) != page.evaluate("() => getComputedStyle(document.querySelector('.steps li.ended')).borderTopColor")
    if extra["ran"]:
        expect(page.locator(".steps li[data-step=rent] .took")).to_have_text("queue wait 2 m 00 s")
        expect(page.locator(".steps li[data-step=run] .took")).to_have_text("run time 20 s")
        expect(page.locator(".steps li[data-step=output] .took")).to_have_text("collection 0 s")
        top = page.locator(".excerpt").bounding_box()["y"]
        assert top < 900, top  # the why, in the first screen
    check_screen(page, f"job-ended-{red}")
    assert context.csp_violations == []
