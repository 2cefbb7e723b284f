"""A template carries its data on the real stack (live server, PostgreSQL, a real Celery worker, real
containers, Debian's Chromium): a job running `python3 /data/job.py` with that file, saved as a template
from its page, runs from the template and succeeds with the script's output; another team sees neither
the template nor its files."""

import re

import pytest
from playwright.sync_api import expect

from jobs.models import Job
from jobtemplates.models import JobTemplate
from tests.conftest import wait_for_release
from tests.e2e.screens import check_screen
from tests.e2e.test_browser import log_in
from tests.factories import submit_job

pytestmark = [pytest.mark.browser, pytest.mark.docker, pytest.mark.celery]

SCRIPT = (
    "import sys\nprint('hello from job.py,', sys.version_info.major)\nopen('/output/said.txt', 'w').write('said')\n"
)


def test_a_template_saved_from_a_job_with_a_data_file_runs_and_succeeds(
    stack, member, team, images, live_server, context, client, outsider
):
    job = submit_job(
        member, team, image=images["python"], name="hello data", command=["python3", "/data/job.py"],
        files={"job.py": SCRIPT}, outputs=["said.txt"], time_limit_s=60, memory_mb=128,
    )  # fmt: skip
    assert wait_for_release(job).outcome == "succeeded", job.reason
    base = live_server.url
    page = context.new_page()
    log_in(page, base, member.username)

    page.goto(f"{base}/jobs/{job.pk}/")
    page.get_by_role("button", name="Save as a team template").click()

    expect(page).to_have_url(re.compile(r"/templates/\d+/$"))
    files = page.locator("#template-files")
    expect(files.get_by_text("/data/job.py")).to_be_visible()
    expect(page.locator("#missing-data")).to_have_count(0)  # the command's file is the template's
    check_screen(page, "template-data")
    template = JobTemplate.objects.get()
    page.get_by_label("Name").fill("hello from the template")
    page.get_by_role("button", name="Submit job").click()

    expect(page).to_have_url(re.compile(r"/jobs/[0-9a-f-]{36}/$"))
    run = wait_for_release(Job.objects.get(name="hello from the template"))
    assert run.outcome == "succeeded", run.reason
    assert run.data_files.get().blob == template.files.get().blob  # named, not copied
    page.reload()
    expect(page.locator("#log")).to_contain_text("hello from job.py, 3")

    client.force_login(member)
    log = client.get(f"/jobs/{run.pk}/log.txt")
    assert "hello from job.py, 3" in b"".join(log.streaming_content if log.streaming else [log.content]).decode()
    said = client.get(f"/jobs/{run.pk}/outputs/said.txt")
    assert b"".join(said.streaming_content) == b"said"

    client.force_login(outsider)
    assert client.get(f"/templates/{template.pk}/").status_code == 404
    assert client.post(f"/templates/{template.pk}/files/job.py/remove/").status_code == 404
    assert client.post(f"/templates/{template.pk}/delete/").status_code == 404
    assert client.post(f"/templates/{template.pk}/", {"name": "x", "cpus": 1, "memory_mb": 64}).status_code == 404
    assert template.files.count() == 1
    assert context.csp_violations == []
