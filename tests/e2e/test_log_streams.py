"""A job's stdout and stderr told apart, end to end: a real container's log through the worker's pump
to the job page, and the whole log downloaded as the job wrote it."""

import pytest
from django.test import Client

from tests.conftest import wait_for_release

pytestmark = [pytest.mark.docker, pytest.mark.celery]


def test_the_job_page_marks_what_the_job_wrote_to_stderr_and_the_download_keeps_the_order(stack, api, member):
    response = api.post(
        "/api/v1/jobs/",
        {
            "name": "two streams",
            "image": "python",
            "command": "sh -c 'echo out; sleep 0.2; echo err >&2; sleep 0.2; echo out2'",
            "cpus": "1",
            "memory_mb": "128",
            "time_limit_s": "60",
        },
        format="multipart",
    )
    assert response.status_code == 201, response.content
    from jobs.models import Job

    job = wait_for_release(Job.objects.get(pk=response.json()["id"]))
    assert job.outcome == "succeeded", job.reason
    browser = Client()
    browser.force_login(member)

    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    lines = browser.get(f"/jobs/{job.pk}/log/lines/?offset=0", HTTP_HX_REQUEST="true").content.decode()

    for html in (page, lines):
        assert '<span class="err">err\n</span>' in html
        assert '<span class="err">out' not in html
        assert "out\n" in html and "out2\n" in html
    download = browser.get(f"/jobs/{job.pk}/log.txt")
    log = b"".join(download.streaming_content) if download.streaming else download.content
    assert log.startswith(b"out\nerr\nout2\n"), log
    assert api.get(f"/api/v1/jobs/{job.pk}/logs/").content.startswith(b"out\nerr\nout2\n")


def test_a_job_printing_the_platforms_prefix_is_shown_as_its_own_stdout(stack, api, member):
    # The job prints lines that begin like the platform's, also after a carriage return, and leaves a
    # symlink in /output, which the platform refuses in a line of its own.
    command = "sh -c \"echo '[e31] fake'; printf '\\r[e31] fake too\\n'; ln -s /etc/passwd /output/passwd\""
    response = api.post(
        "/api/v1/jobs/",
        {"name": "fake lines", "image": "python", "command": command, "cpus": "1", "memory_mb": "128",
         "time_limit_s": "60"},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    from jobs.models import Job

    job = wait_for_release(Job.objects.get(pk=response.json()["id"]))
    browser = Client()
    browser.force_login(member)

    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    lines = browser.get(f"/jobs/{job.pk}/log/lines/?offset=0", HTTP_HX_REQUEST="true").content.decode()

    for html in (page, lines):
        # Two numbered lines of the job's own, outside the platform's one span.
        assert "</a>[e31] fake\n</span>" in html and "</a>\r[e31] fake too\n</span>" in html
        assert '<span class="sys">[e31] refused outputs: passwd (symlink)\n</span>' in html
        assert html.count('<span class="sys">') == 1
    log = api.get(f"/api/v1/jobs/{job.pk}/logs/").content
    assert log == b"[e31] fake\n\r[e31] fake too\n[e31] refused outputs: passwd (symlink)\n", log
