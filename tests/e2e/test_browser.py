"""A person in Debian's Chromium, through the live server, a real Celery worker and real containers."""

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.docker, pytest.mark.celery]
RETRAIN = Path(__file__).resolve().parents[2] / "examples" / "retrain"
PASSWORD = "pw-for-tests-1"
STAGES = ["submit", "rent", "run", "output", "release"]

EPOCHS = 150_000  # a run of a few seconds (and a log over the page's 64 KB tail), so the page is seen running

# Every step the job page shows as htmx swaps it in, and whether the log had epoch lines by then.
# Kept on `window`, so a reload would lose it.
WATCH_STAGES = """() => {
  window.__e31_marker = 1;
  const look = () => [document.querySelector('.steps').dataset.stage,
                      /epoch \\d+: loss/.test(document.querySelector('#log').textContent)];
  window.__e31_seen = [look()];
  new MutationObserver(() => {
    const [stage, logged] = look(), seen = window.__e31_seen, [last, lastLogged] = seen[seen.length - 1];
    if (stage !== last || logged !== lastLogged) seen.push([stage, logged]);
  }).observe(document.body, {childList: true, subtree: true});
}"""


def log_in(page, base_url: str, username: str) -> None:
    static = []
    page.on("response", lambda r: static.append((r.url, r.status)) if "/static/" in r.url else None)
    page.goto(f"{base_url}/login/")
    expect(page).to_have_title(re.compile("Log in"))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{base_url}/")
    expect(page.get_by_role("heading", name="Morning review")).to_be_visible()
    # The vendored htmx is served by the live server and has run: no CDN, nothing missing.
    assert (f"{base_url}/static/htmx.min.js", 200) in static, static
    assert page.evaluate("() => typeof window.htmx === 'object' && typeof htmx.version === 'string'")


def test_member_submits_the_retrain_example_and_watches_it_to_release(stack, member, live_server, context):
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)

    page.get_by_role("link", name="Submit a job").first.click()
    expect(page).to_have_url(f"{base}/jobs/new/")
    page.get_by_label("Name").fill("nightly retrain (browser)")
    page.get_by_label("Image").select_option("python")
    page.get_by_label("Command").fill("python3 /data/train.py")
    page.get_by_label("Environment").fill(json.dumps({"EPOCHS": str(EPOCHS)}))
    page.get_by_label("CPUs").fill("1")
    page.get_by_label("Memory (MB)").fill("256")
    page.get_by_label("Time limit").fill("120")
    page.get_by_label("Outputs").fill("model.json\nmetrics.json")
    page.get_by_label("Data files").set_input_files([RETRAIN / "train.py", RETRAIN / "train.csv"])
    page.get_by_role("button", name="Submit job").click()

    expect(page).to_have_url(re.compile(rf"^{re.escape(base)}/jobs/[0-9a-f-]{{36}}/$"))
    job_url = page.url
    expect(page.get_by_role("heading", name="nightly retrain (browser)")).to_be_visible()
    expect(page.locator(".facts")).to_contain_text("/data/train.py")
    expect(page.locator(".facts")).to_contain_text("/data/train.csv")

    navigations = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url) if frame == page.main_frame else None)
    live_requests = []
    page.on("request", lambda r: live_requests.append(r.url) if re.search(r"/(live|log/lines)/", r.url) else None)
    page.evaluate(WATCH_STAGES)
    first_stage = page.evaluate("() => window.__e31_seen[0][0]")
    assert first_stage != "release", "the job was released before the page could watch it"

    outcome = page.locator("#outcome")
    expect(outcome).to_have_text("succeeded", timeout=120_000)

    # The page got there by htmx swaps alone: no navigation, no reload, the marker survived.
    assert navigations == [], navigations
    assert page.url == job_url
    assert page.evaluate("() => window.__e31_marker") == 1
    seen = page.evaluate("() => window.__e31_seen")
    stages = [stage for stage, _ in seen]
    assert stages[-1] == "release", seen
    assert [STAGES.index(s) for s in stages] == sorted(STAGES.index(s) for s in stages), seen
    assert ["run", True] in seen, f"the page never showed the job running with its log growing: {seen}"
    expect(page.locator(".steps li.done")).to_have_count(5)
    expect(page.get_by_role("button", name="Cancel job")).to_have_count(0)
    expect(page.locator("#log")).to_contain_text("done: final loss")
    full_log = page.request.get(base + page.get_by_role("link", name="full log (text)").get_attribute("href"))
    assert full_log.ok and full_log.text().startswith("loaded 200 rows"), full_log.text()[:200]
    # The page appended the log as it grew (3,000 lines, over the 64 KB a page opens with): each line once,
    # none lost, up to its end.
    shown = page.locator("#log").text_content()
    assert len(shown) > 64 * 1024 and full_log.text().endswith(shown), (len(shown), shown[-200:])
    assert shown.count("done: final loss") == 1
    expect(page.locator(".record")).to_contain_text("succeeded")

    # Polling ended with the release (286, and the log read to its end): no more requests to the live parts.
    # The log's poller learns it is done from its first answer after the release, which may come a poll
    # after the page showed the outcome; it then comes back without a trigger.
    expect(page.locator("#log-poller")).not_to_have_attribute("hx-get", re.compile(".*"), timeout=10_000)
    polls = len(live_requests)
    assert polls >= 1
    page.wait_for_timeout(2_500)
    assert len(live_requests) == polls, live_requests[polls:]

    outputs = page.locator("table.outputs")
    expect(outputs.get_by_role("link")).to_have_text(["metrics.json", "model.json"], ignore_case=False)
    with page.expect_download() as download_info:
        outputs.get_by_role("link", name="metrics.json").click()
    download = download_info.value
    assert download.suggested_filename == "metrics.json"
    metrics = json.loads(Path(download.path()).read_text())
    assert metrics["epochs"] == EPOCHS and metrics["rows"] == 200
    assert metrics["final_loss"] < metrics["initial_loss"]
    assert page.url == job_url  # the download did not navigate away

    # The job list shows it released and succeeded.
    page.get_by_role("link", name="Jobs", exact=True).click()
    row = page.locator("#job-rows tr", has_text="nightly retrain (browser)")
    expect(row.locator("td[data-label=Outcome]")).to_have_text("succeeded")  # released: its outcome
    # Every page, every htmx swap and the polling ran under the strict policy without a violation.
    assert page.evaluate("() => document.querySelectorAll('style').length") == 0  # htmx added none
    assert context.csp_violations == []


def test_submit_form_shows_inline_errors_and_keeps_what_was_typed(stack, member, live_server, context):
    from jobs.models import Job

    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)
    page.goto(f"{base}/jobs/new/")

    page.get_by_label("Name").fill("keeps its values")
    page.get_by_label("Image").select_option("python")
    page.get_by_label("Command").fill('["python3", "/data/train.py"')  # a JSON list, never closed
    page.get_by_label("Environment").fill('{"EPOCHS": "5"}')
    page.get_by_label("CPUs").fill("0")
    page.get_by_label("Memory (MB)").fill("512")
    page.get_by_label("Time limit").fill("90")
    page.get_by_label("Outputs").fill("model.json\nmetrics.json")
    page.get_by_label("Data files").set_input_files([RETRAIN / "train.csv"])
    with page.expect_response(f"{base}/jobs/new/") as response_info:
        page.get_by_role("button", name="Submit job").click()
    assert response_info.value.status == 400

    expect(page).to_have_url(f"{base}/jobs/new/")
    # A summary on top, focused, linking to each field in trouble; each field says what is wrong with it.
    summary = page.get_by_role("alert")
    expect(summary).to_contain_text("The job was not submitted")
    expect(summary).to_be_focused()
    expect(summary.get_by_role("link")).to_have_text(["Command", "CPUs", "Data files"])  # the last: choose again
    cpus = page.get_by_label("CPUs")
    expect(cpus).to_have_attribute("aria-invalid", "true")
    expect(cpus).to_have_attribute("aria-describedby", "id_cpus_error")
    expect(page.locator("#id_cpus_error")).to_contain_text("greater than or equal to 1")
    command = page.get_by_label("Command")
    expect(command).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#id_command_error")).to_contain_text("Cannot parse the command")
    expect(page.locator(".field.invalid")).to_have_count(2)
    summary.get_by_role("link", name="CPUs").click()
    expect(cpus).to_be_focused()

    # Everything typed is still there, so only the mistakes need fixing.
    expect(page.get_by_label("Name")).to_have_value("keeps its values")
    expect(page.get_by_label("Image")).to_have_value("python")
    expect(command).to_have_value('["python3", "/data/train.py"')
    expect(page.get_by_label("Environment")).to_have_value('{"EPOCHS": "5"}')
    expect(cpus).to_have_value("0")
    expect(page.get_by_label("Memory (MB)")).to_have_value("512")
    expect(page.get_by_label("Time limit")).to_have_value("90")
    expect(page.get_by_label("Outputs")).to_have_value("model.json\nmetrics.json")
    # A browser never refills a file input: the page says so instead of losing the files silently.
    expect(page.locator("#data-again")).to_contain_text("Choose again: train.csv (4.4\xa0KB)")
    assert not Job.objects.exists()

    # Fixing the two mistakes (and choosing the file again) submits the job.
    command.fill('["python3", "-c", "print(1)"]')
    cpus.fill("1")
    page.get_by_label("Data files").set_input_files([RETRAIN / "train.csv"])
    page.get_by_role("button", name="Submit job").click()
    expect(page).to_have_url(re.compile(rf"^{re.escape(base)}/jobs/[0-9a-f-]{{36}}/$"))
    job = Job.objects.get()
    assert (job.name, job.cpus, job.memory_mb, job.time_limit_s) == ("keeps its values", 1, 512, 90)
    assert job.env == {"EPOCHS": "5"} and job.output_patterns == ["model.json", "metrics.json"]
    assert [f.name for f in job.data_files.all()] == ["train.csv"]
    assert context.csp_violations == []


def test_the_policy_violation_watch_sees_a_violation(live_server, context, db):
    """The watch above can fail: an inline script, which the policy blocks, is reported."""
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")

    with page.expect_console_message(lambda m: "Content Security Policy" in m.text) as reported:
        page.evaluate(
            "() => { const s = document.createElement('script'); s.textContent = '1'; document.head.append(s); }"
        )

    assert "script-src" in reported.value.text
    assert any("script-src" in v for v in context.csp_violations), context.csp_violations
    context.csp_violations_caused = True  # on purpose: the context's own check at its end lets these be


def test_the_admin_runs_under_the_policy_too(transactional_db, operator, member, team, live_server, context):
    from tests.factories import submit_job

    job = submit_job(member, team, name="seen by an operator")
    base = live_server.url
    page = context.new_page()
    page.goto(f"{base}/admin/login/")
    page.get_by_label("Username").fill(operator.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="The pool, its teams and jobs")).to_be_visible()

    for path in [
        "/admin/jobs/job/",
        f"/admin/jobs/job/{job.pk}/change/",
        "/admin/pool/node/",
        "/admin/teams/team/add/",
    ]:
        page.goto(f"{base}{path}")
        expect(page.locator("#content")).to_be_visible()
    page.goto(f"{base}/admin/jobs/job/")
    page.get_by_role("checkbox").first.check()  # the admin's own script: select all, and the action bar
    expect(page.locator(".action-counter")).to_contain_text("1 of 1 selected")

    assert context.csp_violations == []


def test_a_person_makes_and_revokes_a_token_on_the_account_page(transactional_db, member, live_server, context):
    from teams.tokens import user_for_key

    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)
    page.get_by_role("link", name="Account").click()
    expect(page.get_by_role("heading", name="API tokens")).to_be_visible()

    page.get_by_label("Name").fill("nightly cron")
    page.get_by_role("button", name="Make a token").click()  # htmx swaps the tokens in, the key shown once
    key = page.locator("code.key").inner_text()
    assert user_for_key(key) == member
    expect(page.locator("table.tokens")).to_contain_text("nightly cron")

    page.once("dialog", lambda dialog: dialog.accept())  # hx-confirm asks first
    page.get_by_role("button", name="Revoke").click()
    expect(page.get_by_role("status")).to_contain_text("Token revoked")
    assert user_for_key(key) is None
    expect(page.locator("table.tokens")).not_to_contain_text("nightly cron")
    assert context.csp_violations == []


def test_swagger_ui_runs_from_the_sites_own_files_under_the_policy(transactional_db, live_server, context):
    base = live_server.url
    loaded = []
    page = context.new_page()
    page.on("request", lambda request: loaded.append(request.url))
    page.goto(f"{base}/api/docs/")

    expect(page.locator(".swagger-ui .info .title")).to_contain_text("E31 Network API")
    expect(page.locator(".opblock-summary-path").first).to_be_visible()
    assert all(url.startswith(base) for url in loaded), [u for u in loaded if not u.startswith(base)]
    assert context.csp_violations == []
