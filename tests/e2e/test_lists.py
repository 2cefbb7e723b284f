"""The job list and an array's page in Debian's Chromium at a laptop's 1366 px and a phone's 390 px: no cell of
the job list is cut, a phone shows each job in at most two lines, an array's grid cells and a name's run
history are 24 px targets (WCAG 2.5.8), the task table filters without a script; an array's page refreshes
itself as its tasks end, keeping the table's filter and the focus, and stops once all have; no CSP violation
anywhere.

Jobs are moved through their steps by the domain's actions in this process (no worker, no containers)."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from accounting.meter import Usage
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Outcome, Stage
from tests.e2e.screens import check_screen
from tests.e2e.test_browser import log_in
from tests.factories import (
    JobArrayFactory,
    RuntimeImageFactory,
    array_tasks,
    ended_job,
    run_to_release,
    submit_array_of,
    submit_job,
)

pytestmark = [pytest.mark.browser]
LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}

# Every cell of the table whose content is wider than its box (cut, or scrolled inside it), and whether the
# table is wider than the box it scrolls in.
CUT_CELLS = """() => {
  const cut = [...document.querySelectorAll('table.jobs th, table.jobs td')]
    .filter(cell => cell.scrollWidth > cell.clientWidth)
    .map(cell => `${cell.dataset.label || cell.textContent.trim()}: ${cell.scrollWidth} > ${cell.clientWidth}`);
  const table = document.querySelector('table.jobs');
  return {cut, table: table.scrollWidth, box: table.parentElement.clientWidth};
}"""

# Per row of the list, the lines its shown cells take: their distinct tops, and each cell's own lines.
ROW_LINES = """() => [...document.querySelectorAll('#job-rows tr')].map(row => {
  const shown = [...row.cells].filter(cell => getComputedStyle(cell).display !== 'none');
  const tops = new Set(shown.map(cell => Math.round(cell.getBoundingClientRect().top / 6)));
  const wrapped = shown.filter(cell => {
    const rects = [...cell.querySelectorAll('*'), cell].flatMap(el => [...el.getClientRects()]);
    return new Set(rects.map(r => Math.round(r.bottom / 6))).size > 1 && cell.getBoundingClientRect().height >
      1.9 * parseFloat(getComputedStyle(cell).lineHeight);
  }).map(cell => cell.dataset.label);
  return {job: row.cells[0].textContent.trim(), lines: tops.size, wrapped};
})"""

TARGETS = """selector => [...document.querySelectorAll(selector)].map(el => {
  const box = el.getBoundingClientRect(); return [Math.round(box.width), Math.round(box.height)]; })"""


@pytest.fixture
def image(transactional_db):
    return RuntimeImageFactory(name="python-3.12", description="Python 3.12 and the scientific stack")


@pytest.fixture
def listed(transactional_db, member, team, image, local_node):
    """A list as a laptop shows it: jobs of every ending with long names and log lines, an array's tasks, and
    one waiting."""
    now = timezone.now()
    usage = Usage(cpu_seconds=300.0, memory_peak_mb=48)
    for i, outcome in enumerate([Outcome.FAILED, Outcome.SUCCEEDED, Outcome.OUT_OF_MEMORY, Outcome.TIMED_OUT]):
        ended_job(member, team, outcome=outcome, at=now - timedelta(minutes=5 * i), image=image,
                  name=f"nightly retrain of the ranking model, {outcome}", ran=timedelta(hours=2, minutes=i),
                  exit_code=1 if outcome == Outcome.FAILED else None, usage=usage,
                  log=b"Traceback (most recent call last):\nRuntimeError: the upstream table features_daily_v2 has "
                      b"no partition for 2026-12-06 and the job cannot go on without it\n")  # fmt: skip
    array = JobArrayFactory(team=team, submitted_by=member, name="lr sweep")
    array_tasks(array, image, [(Stage.RELEASE, Outcome.SUCCEEDED), (Stage.RELEASE, Outcome.FAILED),
                               (Stage.RUN, ""), (Stage.SUBMIT, "")])  # fmt: skip
    submit_job(member, team, image=image, name="waiting for a node with a gpu", gpus=0)
    return array


def test_no_cell_of_the_job_list_is_cut_at_1366_px_and_a_phone_row_is_two_lines(listed, member, live_server,
                                                                                 context):  # fmt: skip
    page = context.new_page()
    page.set_viewport_size(LAPTOP)
    log_in(page, live_server.url, member.username)
    page.goto(f"{live_server.url}/jobs/")
    expect(page.locator("#job-rows tr")).to_have_count(9)
    expect(page.locator("#job-rows td[data-label=Job]", has_text="lr sweep[1]")).to_be_visible()

    measured = page.evaluate(CUT_CELLS)
    assert measured["cut"] == [] and measured["table"] <= measured["box"], measured
    row = page.locator("#job-rows tr", has_text="ranking model, failed")
    expect(row.locator("td[data-label='Run time']")).to_have_text("2 h 00 m")
    expect(row.locator("td[data-label=Cost]")).not_to_have_text("—")

    page.set_viewport_size(PHONE)
    lines = page.evaluate(ROW_LINES)
    assert all(row["lines"] <= 2 and not row["wrapped"] for row in lines), lines
    expect(page.locator("#job-rows tr").first.locator("td[data-label='Run time']")).to_be_visible()
    check_screen(page, "jobs-columns")
    assert context.csp_violations == []


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_an_arrays_grid_cells_are_24_px_and_its_task_table_filters_without_a_script(listed, member, live_server,
                                                                                    context, viewport):  # fmt: skip
    page = context.new_page()
    page.set_viewport_size(viewport)
    log_in(page, live_server.url, member.username)
    page.goto(f"{live_server.url}/arrays/{listed.pk}/")

    cells = page.evaluate(TARGETS, ".task-grid a")
    assert len(cells) == 4 and all(w >= 24 and h >= 24 for w, h in cells), cells
    table = page.locator("#task-rows tr")
    expect(table).to_have_count(4)
    expect(table.first).to_contain_text("lr sweep[1]")

    page.locator("#task-table").get_by_role("link", name=re.compile("^succeeded")).click()
    expect(page).to_have_url(re.compile(r"\?outcome=succeeded#task-table$"))
    expect(table).to_have_count(1)
    expect(table.first.locator("td").first).to_have_text("lr sweep[0]")
    box = page.locator("#task-table").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], box
    check_screen(page, "array-tasks")
    assert context.csp_violations == []


def test_a_names_run_history_cells_are_24_px_targets(member, team, image, local_node, live_server, context):
    now = timezone.now()
    runs = [ended_job(member, team, outcome=outcome, at=now - timedelta(minutes=10 * i), name="nightly", image=image)
            for i, outcome in enumerate([Outcome.SUCCEEDED, Outcome.FAILED, Outcome.SUCCEEDED])]  # fmt: skip
    page = context.new_page()
    log_in(page, live_server.url, member.username)
    for viewport in (LAPTOP, PHONE):
        page.set_viewport_size(viewport)
        page.goto(f"{live_server.url}/jobs/{runs[0].pk}/")
        expect(page.locator(".run-strip a.run")).to_have_count(3)
        cells = page.evaluate(TARGETS, ".run-strip a.run")
        assert all(w >= 24 and h >= 24 for w, h in cells), cells
    assert context.csp_violations == []


# What htmx asks of the array page's live part from now on: counted in the page, as each request starts.
COUNT_POLLS = """() => { window.__polls = 0;
  document.body.addEventListener('htmx:beforeRequest', () => { window.__polls += 1; }); }"""


def test_an_arrays_page_refreshes_as_its_tasks_end_and_stops_polling_once_all_have(
    member, team, image, local_node, live_server, context
):
    array = submit_array_of(member, team, range(3), image=image, name="refresh sweep")
    schedule_pass(now=timezone.now())
    tasks = {task.array_index: task for task in Job.objects.filter(array=array)}
    held = sorted(i for i, task in tasks.items() if task.stage == Stage.RENT)
    assert len(held) >= 2, "the pool had no room for two tasks"
    page = context.new_page()
    page.clock.install()  # the page's own timers, run forward below to show polling has stopped
    log_in(page, live_server.url, member.username)
    page.goto(f"{live_server.url}/arrays/{array.pk}/?outcome=rent")
    table = page.locator("#task-rows tr")
    expect(table).to_have_count(len(held))
    expect(page.locator("#array-live")).to_have_attribute("hx-trigger", "every 5s")
    kept = table.nth(1).locator("a")  # a task that will still be held after the first ends
    kept_href = kept.get_attribute("href")
    kept.focus()

    run_to_release(tasks[held[0]], now=timezone.now())

    # The poll swaps in the new counts and grid, the table keeps its filter, the focus stays on its link.
    expect(page.locator("#counts li[data-key=succeeded] strong")).to_have_text("1")
    expect(page.locator(".task-group[data-key=succeeded] .task-grid a")).to_have_count(1)
    expect(table).to_have_count(len(held) - 1)
    expect(page.locator("#array-status")).to_have_text("refresh sweep: 1 of 3 tasks ended.")
    assert page.url.endswith("?outcome=rent")
    page.wait_for_function("href => document.activeElement.getAttribute('href') === href", arg=kept_href)
    page.evaluate(COUNT_POLLS)
    page.clock.run_for(6000)
    assert page.evaluate("() => window.__polls") >= 1  # still polling while a task has not ended

    for index in sorted(tasks):
        task = Job.objects.get(pk=tasks[index].pk)
        if task.stage == Stage.SUBMIT:
            schedule_pass(now=timezone.now())
            task.refresh_from_db()
        if task.stage != Stage.RELEASE:
            run_to_release(task, now=timezone.now())

    expect(page.locator("#array-stage")).to_have_text("release")
    expect(page.locator("#counts li[data-key=succeeded] strong")).to_have_text("3")
    assert page.locator("#array-live").get_attribute("hx-trigger") is None
    expect(page.locator("#cancel-array")).to_have_count(0)
    page.evaluate(COUNT_POLLS)
    page.clock.run_for(60_000)  # twelve polls' worth
    assert page.evaluate("() => window.__polls") == 0
    assert context.csp_violations == []
