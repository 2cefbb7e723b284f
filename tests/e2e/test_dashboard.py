"""The dashboard in Debian's Chromium: the morning review under a frozen clock, the job list's filters
and cards, a running job's log growing under the reader's focus, selection and scroll, previews,
download all, resubmit; each screen photographed at desktop and phone width and checked with axe-core.

Jobs are moved through their steps by the domain's actions in this process (no worker, no containers):
what is tested is the pages."""

import io
import re
import zipfile
import zoneinfo
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import time_machine
from django.utils import timezone
from playwright.sync_api import expect

from accounting.meter import Usage
from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Dependency, Job, Outcome, Stage
from jobs.storage import logs
from tests.e2e.screens import SCREENS, check_screen
from tests.e2e.test_browser import log_in
from tests.factories import JobArrayFactory, RuntimeImageFactory, array_tasks, ended_job, store_output, submit_job

pytestmark = [pytest.mark.browser]
PARIS = zoneinfo.ZoneInfo("Europe/Paris")
MORNING = datetime(2030, 3, 12, 8, 30, tzinfo=PARIS)
EVENING = datetime(2030, 3, 11, 18, 0, tzinfo=PARIS)


@pytest.fixture
def image(transactional_db):
    return RuntimeImageFactory(description="BusyBox: sh and the usual tools")


# How a job may end: a preempted attempt goes back to the queue, so no job ends `preempted`.
ENDINGS = [outcome for outcome in Outcome.values if outcome != Outcome.PREEMPTED]


@pytest.fixture
def night(transactional_db, member, outsider, other_team, paris, image, local_node):
    """Jobs of every outcome over the night before MORNING, one of another team, one still running."""
    at = EVENING + timedelta(hours=1)
    made = {}
    for i, outcome in enumerate(ENDINGS):
        made[outcome] = ended_job(
            member, paris, outcome=outcome, at=at + timedelta(minutes=30 * i), name=f"{outcome} job",
            exit_code=3 if outcome == Outcome.FAILED else None,
            reason="exit code 3" if outcome == Outcome.FAILED else "",
            ran=timedelta(0) if outcome == Outcome.CANCELLED else timedelta(minutes=10),
            usage=Usage(cpu_seconds=30.0, memory_peak_mb=8),
        )  # fmt: skip
    store_output(made[Outcome.SUCCEEDED], "result.csv", b"epoch,loss\n1,0.5\n2,0.25\n")
    ended_job(outsider, other_team, outcome=Outcome.FAILED, at=at, name="someone else's job")
    with time_machine.travel(MORNING - timedelta(minutes=3), tick=False):
        running = submit_job(member, paris, image=image, name="still running", time_limit_s=600)
        schedule_pass()
        running.refresh_from_db()
        actions.start_run(running, now=timezone.now())
    return made


def test_the_morning_review_shows_the_night_failures_first(night, member, live_server, context):
    base = live_server.url
    page = context.new_page()
    with time_machine.travel(MORNING, tick=True):
        log_in(page, base, member.username)

        # Failures first, each with why; the rest after; the other team's job nowhere.
        ended = page.locator("#ended > li")
        expect(ended).to_have_count(len(ENDINGS))
        outcomes = [ended.nth(i).get_attribute("data-outcome") for i in range(len(ENDINGS))]
        failures = {"failed", "timed_out", "out_of_memory", "node_lost", "rejected"}
        assert set(outcomes[:5]) == failures and set(outcomes[5:]) == {"succeeded", "cancelled"}, outcomes
        expect(page.locator("#ended")).not_to_contain_text("someone else's job")
        failed = page.locator("#ended > li[data-outcome=failed]")
        expect(failed.locator(".exit-code")).to_have_text("3")
        expect(failed).to_contain_text("exit code 3")
        expect(failed).to_contain_text("queue wait")
        expect(failed.locator(".cost")).to_have_text(re.compile(r"^\d+\.\d\d EUR$"))
        # 30 cpu-seconds in 600 held: flagged as over-asked.
        expect(failed.locator(".over-asked").first).to_be_visible()
        expect(page.locator("#night-sum li[data-outcome=failed]")).to_have_text("1 failed (+1)")
        page.get_by_text("Outcomes over 24 h, 7 d and 30 d").click()  # folded last
        expect(page.locator("#counts tr[data-outcome=failed] td").first).to_have_text("1")
        expect(page.locator(".running-job progress")).to_have_attribute("max", "600")
        expect(page.locator("#since")).to_be_visible()

        # The running part is polled; the keyboard focus stays on the link it was on.
        running = page.locator(".running-job a").first
        running.focus()
        focused = running.get_attribute("id")
        page.evaluate("() => { document.querySelector('#review-now').__old = true; }")
        page.wait_for_function("() => !document.querySelector('#review-now').__old")  # swapped by the poll
        page.wait_for_function("() => !document.querySelector('#review-now').classList.contains('htmx-settling')")
        assert page.evaluate("() => document.activeElement.id") == focused

        # One click to the job; one to its outputs, from its one line.
        succeeded = page.locator("#ended > li[data-outcome=succeeded]")
        expect(succeeded).to_have_class("ended-line")
        with page.expect_download() as download:
            succeeded.get_by_role(
                "link", name=re.compile(r"^Download 1 output, 24\sbytes of succeeded job \(zip\)$")
            ).click()
        archive = zipfile.ZipFile(io.BytesIO(Path(download.value.path()).read_bytes()))
        assert archive.namelist() == ["result.csv"]
        check_screen(page, "review")
        succeeded.get_by_role("link", name="succeeded job", exact=True).click()
        expect(page.get_by_role("heading", name="succeeded job")).to_be_visible()
    assert context.csp_violations == []


def test_the_job_list_filters_sorts_and_becomes_cards_on_a_phone(night, member, live_server, context):
    base = live_server.url
    page = context.new_page()
    with time_machine.travel(MORNING, tick=True):
        log_in(page, base, member.username)
        page.goto(f"{base}/jobs/")
        page.get_by_text("Filter", exact=True).click()
        page.get_by_role("group", name="Outcome").get_by_role("checkbox", name="Failed", exact=True).check()
        page.get_by_role("button", name="Show").click()
        expect(page).to_have_url(re.compile(r"/jobs/\?.*outcome=failed"))
        rows = page.locator("#job-rows tr")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("failed job")

        page.goto(f"{base}/jobs/?stage=released")
        page.get_by_role("link", name="Job", exact=True).click()  # sort by name
        expect(page).to_have_url(re.compile(r"sort=name"))
        expect(page).to_have_url(re.compile(r"stage=released"))  # the filters kept
        names = page.locator("#job-rows td[data-label=Job]").all_inner_texts()
        assert names == sorted(names) and len(names) == len(ENDINGS), names

        assert page.request.get(f"{base}/jobs/?outcome=fine").status == 400
        check_screen(page, "jobs")
        page.set_viewport_size({"width": 390, "height": 844})
        card = page.locator("#job-rows tr").first
        expect(card.locator("td[data-label=Outcome] .outcome")).to_be_visible()
        assert card.bounding_box()["width"] <= 390
        expect(page.locator("table.jobs thead")).to_be_hidden()
    assert context.csp_violations == []


def test_a_growing_log_keeps_the_readers_focus_selection_and_scroll(member, team, image, local_node, live_server,
                                                                    context, transactional_db):  # fmt: skip
    job = submit_job(member, team, image=image, name="chatty", time_limit_s=600)
    schedule_pass()
    job.refresh_from_db()
    assert actions.start_run(job, now=timezone.now())
    offset = 0
    for i in range(200):
        line = f"epoch {i}: loss {1 / (i + 1):.4f}\n".encode()
        logs.append(job.pk, offset, line)
        offset += len(line)

    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)
    page.goto(f"{base}/jobs/{job.pk}/")
    box = page.locator(".log-scroll")
    expect(page.locator("#log")).to_contain_text("epoch 199")
    at_end = "el => el.scrollHeight - el.scrollTop - el.clientHeight < 8"
    assert box.evaluate(at_end), "the log opens at its end"

    # The reader scrolls up, selects a line and keeps the keyboard focus in the log.
    box.evaluate("el => { el.scrollTop = 300; }")
    page.evaluate("""() => {
      const text = document.querySelector('#log .l').lastChild;  // after the line's number
      const range = document.createRange();
      range.setStart(text, 0); range.setEnd(text, 10);
      getSelection().removeAllRanges(); getSelection().addRange(range);
    }""")
    box.evaluate("el => el.focus({preventScroll: true})")
    page.evaluate("() => { window.__e31_marker = 1; }")

    for i in range(200, 260):
        line = f"epoch {i}: loss {1 / (i + 1):.4f}\n".encode()
        logs.append(job.pk, offset, line)
        offset += len(line)
    expect(page.locator("#log")).to_contain_text("epoch 259")

    assert page.evaluate("() => window.__e31_marker") == 1  # no reload
    assert page.evaluate("() => getSelection().toString()") == "epoch 0: l"
    assert page.evaluate("() => document.activeElement.classList.contains('log-scroll')")
    assert box.evaluate("el => el.scrollTop") == 300  # not pulled to the end while reading above it
    assert page.locator("#log").inner_text().count("epoch 200:") == 1  # appended once

    # Back at the end, the view follows new lines.
    box.evaluate("el => { el.scrollTop = el.scrollHeight; }")
    logs.append(job.pk, offset, b"epoch 260: loss 0.0038\n")
    expect(page.locator("#log")).to_contain_text("epoch 260")
    offset += len(b"epoch 260: loss 0.0038\n")
    warning = b"warning: the loss plateaued\n"  # from stderr: appended marked, its contrast checked below
    logs.append(job.pk, offset, warning, stderr=[(offset, offset + len(warning))])
    expect(page.locator("#log .err")).to_have_text(warning.decode())
    page.wait_for_function(f"() => ({at_end})(document.querySelector('.log-scroll'))")
    check_screen(page, "job-running")
    assert context.csp_violations == []


def test_a_released_job_previews_downloads_all_and_is_resubmitted(member, team, image, local_node, live_server,
                                                                   context, transactional_db):  # fmt: skip
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now(), name="convert",
                    files={"input.csv": "x,y\n"}, usage=Usage(cpu_seconds=590.0, memory_peak_mb=50))  # fmt: skip
    store_output(job, "table.csv", b"epoch,loss\n1,0.5\n2,0.25\n")
    store_output(job, "notes.txt", b"<script>document.title='owned'</script>")
    store_output(job, "metrics.json", b'{"loss": 0.25}')

    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)
    page.goto(f"{base}/jobs/{job.pk}/")
    expect(page.locator(".steps li .took")).to_have_count(4)
    expect(page.locator("#metrics figure")).to_have_count(1)

    outputs = page.locator("table.outputs")
    outputs.locator("summary", has_text="table.csv").click()
    expect(outputs.locator(".csv-preview td", has_text="0.25")).to_be_visible()
    outputs.locator("summary", has_text="notes.txt").click()
    expect(outputs.locator(".text-preview").last).to_contain_text("<script>")  # shown as text, never run
    assert page.title() != "owned"

    with page.expect_download() as download:
        page.locator("#download-all").click()
    archive = zipfile.ZipFile(io.BytesIO(Path(download.value.path()).read_bytes()))
    assert sorted(archive.namelist()) == ["metrics.json", "notes.txt", "table.csv"]
    assert archive.read("table.csv") == b"epoch,loss\n1,0.5\n2,0.25\n"
    check_screen(page, "job-released")

    page.get_by_role("link", name="Resubmit").click()
    expect(page.get_by_label("Name")).to_have_value("convert")
    expect(page.get_by_label("input.csv")).to_be_checked()
    check_screen(page, "resubmit")
    page.get_by_label("Name").fill("convert again")
    page.get_by_label("Time limit").fill("90m")
    page.get_by_role("button", name="Submit job").click()
    expect(page).to_have_url(re.compile(rf"^{re.escape(base)}/jobs/[0-9a-f-]{{36}}/$"))
    expect(page.locator("#messages")).to_contain_text("Submitted again")
    again = Job.objects.get(name="convert again")
    assert again.time_limit_s == 5400 and [f.name for f in again.data_files.all()] == ["input.csv"]
    assert again.stage == Stage.SUBMIT
    assert context.csp_violations == []


def test_the_submit_form_and_the_error_pages_pass_the_checks(member, outsider, team, image, local_node, live_server,
                                                              context, browser, transactional_db):  # fmt: skip
    job = submit_job(member, team, image=image, name="mine")
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)
    page.goto(f"{base}/jobs/new/")
    expect(page.locator("#pool-now")).to_contain_text("Largest node")
    page.get_by_label("Time limit").fill("2 hours")
    page.get_by_label("Outputs").fill("/abs\n../up")
    page.get_by_role("button", name="Submit job").click()
    expect(page.locator(".field-time_limit_s .error")).to_contain_text("90m, 2h")
    expect(page.locator(".field-outputs .error p")).to_have_count(2)
    expect(page.get_by_label("Time limit")).to_have_value("2 hours")  # what was typed, kept
    check_screen(page, "submit-form")

    page.goto(f"{base}/jobs/{job.pk}/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel job").click()
    expect(page.locator("#outcome")).to_have_text("cancelled")
    expect(page.locator("#messages")).to_contain_text("Cancelled mine")  # the action's message, by htmx

    # The outsider in a browser of their own (a context shares its cookies between its pages).
    outsiders = browser.new_context(viewport={"width": 1280, "height": 900})
    other = outsiders.new_page()
    log_in(other, base, outsider.username)
    response = other.goto(f"{base}/jobs/{job.pk}/")
    assert response.status == 404
    expect(other.get_by_role("heading", name="Nothing here")).to_be_visible()
    check_screen(other, "not-found")
    other.keyboard.press("Tab")
    expect(other.get_by_role("link", name="Skip to content")).to_be_focused()
    outsiders.close()
    assert context.csp_violations == []


def test_the_accessibility_check_can_fail(context):
    page = context.new_page()
    page.set_content('<html><body><main><img src="x.png"><button></button></main></body></html>')

    with pytest.raises(AssertionError, match="image-alt|button-name"):
        check_screen(page, "axe-self-check")


def test_files_dropped_on_the_form_are_sent_with_an_upload_progress_bar(member, team, image, local_node, live_server,
                                                                         context, transactional_db):  # fmt: skip
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)
    page.goto(f"{base}/jobs/new/")
    page.get_by_label("Name").fill("dropped data")
    page.get_by_label("Image").select_option(image.name)
    page.get_by_label("Command").fill("cat /data/dropped.csv")
    page.get_by_label("Time limit").fill("2h")
    # A drop as a person makes it: a DataTransfer holding a file, dropped on the zone.
    page.evaluate("""() => {
      const zone = document.querySelector('[data-drop-zone]');
      const data = new DataTransfer();
      data.items.add(new File(['a,b\\n'.repeat(50000)], 'dropped.csv', {type: 'text/csv'}));
      zone.dispatchEvent(new DragEvent('dragover', {dataTransfer: data, bubbles: true, cancelable: true}));
      zone.dispatchEvent(new DragEvent('drop', {dataTransfer: data, bubbles: true, cancelable: true}));
      // What the bar showed at every progress event of any request, and when the form's request ended
      // (kept across the page change that follows).
      const seen = [];
      const bar = document.getElementById('upload-progress');
      const record = () => seen.push([bar.hidden, bar.value, bar.max]);
      document.addEventListener('htmx:xhr:progress', record);
      document.addEventListener('htmx:afterRequest', (event) => {
        if (event.detail.elt.id !== 'job-form') return;
        record();
        sessionStorage.setItem('e31-progress', JSON.stringify(seen));
      });
    }""")
    expect(page.locator("[data-drop-list]")).to_have_text("dropped.csv")
    assert page.evaluate("() => document.querySelector('#id_data').files.length") == 1

    page.get_by_role("button", name="Submit job").click()
    expect(page).to_have_url(re.compile(rf"^{re.escape(base)}/jobs/[0-9a-f-]{{36}}/$"))
    expect(page.locator("#messages")).to_contain_text("Job dropped data submitted")
    seen = page.evaluate("() => JSON.parse(sessionStorage.getItem('e31-progress'))")
    shown = [(sent, total) for hidden, sent, total in seen if not hidden]
    # The bar showed the upload's bytes only (never the answer's download), and the whole of them at the end.
    assert shown and all(0 <= sent <= total and total > 200_000 for sent, total in shown)
    assert shown[-1][0] == shown[-1][1]
    job = Job.objects.get(name="dropped data")
    assert [f.name for f in job.data_files.all()] == ["dropped.csv"] and job.time_limit_s == 7200
    assert context.csp_violations == []


@pytest.fixture
def bad_night(transactional_db, member, paris, image, local_node):
    """A night whose latest failure wrote ten long lines of stderr, after runs of the same name and others."""
    at = EVENING + timedelta(hours=1)
    for i in range(6):
        ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=at + timedelta(minutes=i), name="load tables",
                  image=image)  # fmt: skip
    trace = b"".join(f"  File \"/data/load.py\", line {i}, in step_{i} with a rather long line of context\n".encode()
                     for i in range(12)) + b"ERROR: upstream table missing\n"  # fmt: skip
    ended_job(member, paris, outcome=Outcome.FAILED, at=at + timedelta(hours=2), name="load tables", exit_code=3,
              reason="exit code 3", log=b"ok\n" + trace, image=image)  # fmt: skip
    for i in range(4):
        ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=at + timedelta(hours=3, minutes=i), name=f"report {i}",
                  image=image)  # fmt: skip


@pytest.mark.parametrize(("width", "height"), [(1366, 900), (390, 844)])
def test_the_first_failure_and_why_it_failed_are_on_the_first_screen(
    bad_night, member, live_server, context, width, height
):
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": height})
    with time_machine.travel(MORNING, tick=True):
        log_in(page, live_server.url, member.username)

        first = page.locator("#ended > li").first
        expect(first).to_have_attribute("data-outcome", "failed")
        excerpt = first.locator("pre.excerpt-text")
        expect(excerpt).to_contain_text("ERROR: upstream table missing")
        scroll = first.locator(".excerpt-scroll")
        expect(first.get_by_text("Last lines of its log")).to_be_visible()
        for part in (first.locator(".job-link"), first.locator(".why"), scroll, first.locator(".run-strip")):
            box = part.bounding_box()
            assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= height, (part, box)
        # The counts and the window come after it, or folded: no screen of zeros first.
        assert page.locator("#counts-h").bounding_box()["y"] > scroll.bounding_box()["y"]
        expect(page.locator("#counts")).to_be_hidden()
        expect(page.locator("#review-since")).to_be_hidden()
        # Its name's history: seven runs, this one the last, each a link saying how it ended.
        runs = first.locator(".run-strip a.run")
        expect(runs).to_have_count(7)
        expect(runs.last).to_have_attribute("aria-current", "true")
        expect(runs.first).to_have_attribute("aria-label", re.compile(r"^succeeded, run time 10 m 00 s, cost "))
        # However long, it opens at its end, whose last line says most, inside its box; the keyboard reaches it.
        assert scroll.evaluate(
            """e => { const text = e.querySelector('pre').firstChild, at = text.data.lastIndexOf('ERROR');
                      const range = document.createRange(); range.setStart(text, at); range.setEnd(text, text.length);
                      const line = range.getBoundingClientRect(), box = e.getBoundingClientRect();
                      return line.top >= box.top && line.bottom <= box.bottom
                             && e.tabIndex === 0 && e.getAttribute('role') === 'region'; }"""
        )

        SCREENS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENS / f"review-first-screen-{width}x{height}.png"))  # what a reader sees first

        page.locator(".review-since summary").click()
        expect(page.locator("#review-since")).to_be_visible()
        check_screen(page, "review-failures")
    assert context.csp_violations == []


@pytest.fixture
def usual_night(transactional_db, member, paris, image, local_node):
    """The issue's night: twelve jobs (seven succeeded, two failed, one out of memory, one timed out, one
    cancelled), an array of twelve with three failures and a pipeline of three broken in the middle; the seven
    successes are runs of names seen before."""
    at = EVENING + timedelta(hours=1)
    endings = [Outcome.SUCCEEDED] * 7 + [Outcome.FAILED] * 2 + [Outcome.OUT_OF_MEMORY, Outcome.TIMED_OUT,
                                                                Outcome.CANCELLED]  # fmt: skip
    for i, outcome in enumerate(endings):
        name = f"report {i}" if outcome == Outcome.SUCCEEDED else f"{outcome} {i}"
        for earlier in range(3 if outcome == Outcome.SUCCEEDED else 0):  # each success's name has a history
            ended_job(member, paris, outcome=Outcome.SUCCEEDED, at=EVENING - timedelta(days=earlier + 1), name=name,
                      image=image)  # fmt: skip
        ended_job(member, paris, outcome=outcome, at=at + timedelta(minutes=20 * i), name=name, image=image,
                  exit_code=1 if outcome == Outcome.FAILED else None, reason="exit code 1" if outcome == Outcome.FAILED
                  else "", log=b"reading\nERROR: upstream table missing\n", usage=Usage(cpu_seconds=30.0,
                  memory_peak_mb=8))  # fmt: skip
    sweep = JobArrayFactory(team=paris, submitted_by=member, name="lr sweep", submitted_at=EVENING)
    tasks = [(Stage.RELEASE, Outcome.SUCCEEDED)] * 9 + [(Stage.RELEASE, Outcome.FAILED)] * 3
    array_tasks(sweep, image, tasks, at=at + timedelta(hours=2))
    steps = [("extract", Outcome.SUCCEEDED), ("transform", Outcome.FAILED), ("load", Outcome.CANCELLED)]
    pipeline = [ended_job(member, paris, outcome=outcome, at=at + timedelta(hours=3 + i), name=name)
                for i, (name, outcome) in enumerate(steps)]  # fmt: skip
    for upstream, downstream in zip(pipeline, pipeline[1:], strict=False):
        Dependency.objects.create(job=downstream, on_job=upstream, kind=Dependency.Kind.OK)


@pytest.mark.parametrize(("width", "height"), [(1366, 900), (390, 844)])
def test_a_usual_night_is_summed_first_and_fits_two_screens(usual_night, member, live_server, context, width, height):
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": height})
    with time_machine.travel(MORNING, tick=True):
        log_in(page, live_server.url, member.username)

        summary = page.locator("#night-sum")
        expect(summary).to_contain_text("6 failed")  # two alone, three tasks of the array, a pipeline step
        expect(summary).to_contain_text("1 out of memory")
        expect(summary).to_contain_text(re.compile(r"cost \d+\.\d\d EUR"))
        expect(summary).to_contain_text("core-hours held")
        expect(page.locator("#ended > li.ended-job")).to_have_count(4)  # the failures, as cards
        expect(page.locator("#ended > li.ended-line")).to_have_count(8)  # the rest, one line each
        # The sum is before the first card, inside the first screen, on a phone too.
        box, first = summary.bounding_box(), page.locator("#ended > li").first.bounding_box()
        assert box is not None and first is not None and box["y"] + box["height"] <= first["y"], (box, first)
        assert box["y"] >= 0 and box["y"] + box["height"] <= height, box
        assert first["y"] < height, first  # and the first failure starts there
        # Every open failure is named, with a link to its card, on the first screen, however tall the cards.
        named = page.locator(".sum-failures li")
        expect(named).to_have_text([
            re.compile(r"^transform broke its pipeline$"), re.compile(r"^lr sweep 3 failed of 12$"),
            *[re.compile(rf"^{name}\s") for name in ("timed_out 10", "out_of_memory 9", "failed 8", "failed 7")],
        ])  # fmt: skip
        last = named.last.bounding_box()
        assert last is not None and last["y"] + last["height"] <= height, last
        expect(page.locator("#ended > li").first).to_have_class(re.compile(r"\bfailure\b"))
        # Running and waiting come after what ended, the outcome counts last.
        ended_end = page.locator("#ended").bounding_box()
        assert ended_end["y"] + ended_end["height"] <= page.locator("#running-h").bounding_box()["y"]
        assert page.locator("#running-h").bounding_box()["y"] < page.locator("#counts-h").bounding_box()["y"]
        tall = page.evaluate("() => document.documentElement.scrollHeight")
        SCREENS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENS / f"review-usual-night-{width}x{height}.png"), full_page=True)
        print(f"review at {width}x{height}: {tall} px high; first card at {first['y']:.0f} px")
        if width > 1000:
            assert tall <= 2 * height, f"the review is {tall} px high: more than two screens of {height}"
        named.nth(1).get_by_role("link").click()  # to the array's card
        expect(page.locator(".ended-array:target")).to_contain_text("lr sweep")
    assert context.csp_violations == []
