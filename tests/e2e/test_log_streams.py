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
