"""A running job's live use (Slurm's sstat) over the real stack: its node samples the container's cgroup
into the API's `usage_now` while it runs, and forgets it when the run ends."""

import pytest

from jobs.models import Job
from tests.conftest import wait_for_release, wait_until

pytestmark = [pytest.mark.docker, pytest.mark.celery]


@pytest.mark.parametrize("isolation", ["standard", "strong"])  # runc, and runsc (gVisor)
def test_a_busy_job_shows_its_cpu_and_memory_while_it_runs_and_none_after(stack, api, isolation):
    response = api.post(
        "/api/v1/jobs/",
        {"name": "burn", "image": "busybox", "command": "sh -c 'while :; do :; done'", "cpus": "1",
         "memory_mb": "64", "time_limit_s": "20", "isolation": isolation},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    job_id = response.json()["id"]

    def busy_sample():
        body = api.get(f"/api/v1/jobs/{job_id}/").json()
        assert body["stage"] in ("submit", "rent", "run"), f"ended before a sample was seen: {body}"
        usage = body["usage_now"]
        return body if usage and usage["cpu_percent"] > 20 else None

    body = wait_until(busy_sample, 18, interval=0.5, message="a sample of its cpu use above 20%")
    usage = body["usage_now"]
    assert body["stage"] == "run" and body["hold"]["runtime"] == ("runsc" if isolation == "strong" else "runc")
    assert set(usage) == {"cpu_percent", "memory_mb", "at"}
    assert 20 < usage["cpu_percent"] <= 100 * 1.05  # one held core, whatever else the machine runs
    assert isinstance(usage["memory_mb"], int) and 0 <= usage["memory_mb"] <= 64

    job = wait_for_release(Job.objects.get(pk=job_id), timeout=90)
    assert job.outcome == "timed_out", job.reason
    assert api.get(f"/api/v1/jobs/{job_id}/").json()["usage_now"] is None
    assert job.usage_now is None, "the node left its last sample on the ended job"
