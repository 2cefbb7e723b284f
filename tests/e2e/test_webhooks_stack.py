"""A webhook through the real stack: made over HTTP, a real container job run by the Celery worker
process, whose release writes the delivery and kicks `webhooks.deliver` in that worker, which POSTs it,
signed, to a real receiver on loopback."""

import json

import pytest

from jobs.models import Job, Outcome
from tests.conftest import wait_for_release, wait_until
from tests.webhooks.http_receiver import ALLOWED, Receiver
from webhooks.models import Delivery

pytestmark = [pytest.mark.docker, pytest.mark.celery]


@pytest.fixture
def receiver():
    receiver = Receiver().start()
    yield receiver
    receiver.stop()


def test_a_released_job_reaches_the_teams_webhook_signed(stack, api, settings, receiver):
    # The worker process has the same allow list (tests/conftest.py, worker_env).
    settings.E31_WEBHOOK_ALLOWED_HOSTS = [ALLOWED]
    made = api.post("/api/v1/webhooks/", {"url": receiver.url, "events": ["job.released"]}, format="json")
    assert made.status_code == 201, made.content
    receiver.secret = made.json()["secret"]

    response = api.post(
        "/api/v1/jobs/",
        {"name": "ends badly", "image": "busybox", "command": "sh -c 'exit 4'", "cpus": "1", "memory_mb": "64",
         "time_limit_s": "60"},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    job = wait_for_release(Job.objects.get(pk=response.json()["id"]), 120)
    assert job.outcome == Outcome.FAILED

    (got,) = receiver.wait_for(1, 60)
    assert got.signed and got.headers["X-E31-Event"] == "job.released"
    body = json.loads(got.body)
    assert (body["event"], body["data"]["id"], body["data"]["outcome"], body["data"]["exit_code"]) == (
        "job.released", str(job.pk), "failed", 4,
    )  # fmt: skip
    delivery = wait_until(
        lambda: Delivery.objects.filter(status="delivered").first(), 20, message="the delivery to be recorded"
    )
    assert (str(delivery.delivery_id), delivery.response_code, delivery.attempts) == (
        got.headers["X-E31-Delivery"], 200, 1,
    )  # fmt: skip
    log = api.get(f"/api/v1/webhooks/{made.json()['id']}/deliveries/").json()["results"]
    assert [(d["event"], d["status"], d["response_code"]) for d in log] == [("job.released", "delivered", 200)]
