"""End to end over HTTP, PostgreSQL, a real Celery worker process and real containers."""

import hashlib
import json
from pathlib import Path

import pytest

from accounting.models import Record
from tests.conftest import wait_for_release

pytestmark = [pytest.mark.docker, pytest.mark.celery]
RETRAIN = Path(__file__).resolve().parents[2] / "examples" / "retrain"


def submit_retrain(api):
    with open(RETRAIN / "train.py", "rb") as script, open(RETRAIN / "train.csv", "rb") as csv:
        return api.post(
            "/api/v1/jobs/",
            {
                "name": "nightly retrain",
                "image": "python",
                "command": "python3 /data/train.py",
                "cpus": "1",
                "memory_mb": "256",
                "time_limit_s": "120",
                "outputs": ["model.json", "metrics.json"],
                "env": json.dumps({"EPOCHS": "100"}),
                "data": [script, csv],
            },
            format="multipart",
        )


def test_submitted_job_succeeds_and_returns_its_outputs_to_its_team(stack, api, outsider_api):
    response = submit_retrain(api)
    assert response.status_code == 201, response.content
    job_id = response.json()["id"]
    from jobs.models import Job

    job = wait_for_release(Job.objects.get(pk=job_id))
    assert job.outcome == "succeeded", job.reason

    body = api.get(f"/api/v1/jobs/{job_id}/").json()
    assert body["stage"] == "release" and body["outcome"] == "succeeded" and body["exit_code"] == 0
    assert all(body[f] for f in ("submitted_at", "held_at", "started_at", "finished_at", "released_at"))
    assert body["hold"]["node"] and len(body["hold"]["cpu_set"]) == 1
    assert body["record"]["outcome"] == "succeeded"

    listing = {o["path"]: o for o in api.get(f"/api/v1/jobs/{job_id}/outputs/").json()}
    assert set(listing) == {"model.json", "metrics.json"}
    download = api.get(f"/api/v1/jobs/{job_id}/outputs/metrics.json")
    content = b"".join(download.streaming_content)
    assert hashlib.sha256(content).hexdigest() == listing["metrics.json"]["sha256"]
    metrics = json.loads(content)
    assert metrics["epochs"] == 100 and metrics["final_loss"] < metrics["initial_loss"]

    log = api.get(f"/api/v1/jobs/{job_id}/logs/")
    assert b"loaded 200 rows" in log.content and int(log["X-Next-Offset"]) == len(log.content)

    assert Record.objects.filter(job_id=job_id).count() == 1
    record = Record.objects.get(job_id=job_id)
    assert record.cpus == 1 and record.memory_mb == 256 and record.held_seconds > 0

    for path in ("", "logs/", "outputs/", "outputs/metrics.json"):
        assert outsider_api.get(f"/api/v1/jobs/{job_id}/{path}").status_code == 404, path


def test_a_burst_of_submissions_is_held_and_run_without_the_periodic_pass(stack, api):
    """The suite's worker runs no beat: every job here reaches RENT through the coalesced nudges alone
    (most submissions of a burst find a nudge pending and send none)."""
    from jobs.models import Job

    sent = []
    for i in range(8):
        response = api.post(
            "/api/v1/jobs/",
            {"name": f"burst {i}", "image": "busybox", "command": "true", "cpus": "1", "memory_mb": "64",
             "time_limit_s": "60"},
            format="multipart",
        )  # fmt: skip
        assert response.status_code == 201, response.content
        sent.append(response.json()["id"])

    for job_id in sent:
        job = wait_for_release(Job.objects.get(pk=job_id), 120)
        assert job.outcome == "succeeded", job.reason
