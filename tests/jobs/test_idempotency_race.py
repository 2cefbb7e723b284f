"""Idempotency-Key under a real race: concurrent requests on a live server, each in its own thread and
database connection, with one key."""

import threading

import httpx
import pytest

from jobs.models import Job
from teams.people import token_for
from tests.factories import RuntimeImageFactory

RACERS = 20


def submission(**changes: str) -> dict[str, str]:
    return {
        "name": "nightly", "image": "busybox", "command": "echo hi", "cpus": "1", "memory_mb": "64",
        "time_limit_s": "60", **changes,
    }  # fmt: skip


def race(url: str, key: str, bodies: list[dict[str, str]]) -> list[httpx.Response]:
    """Send every body at once (a barrier lets them go together), each with the same Idempotency-Key."""
    start = threading.Barrier(len(bodies))
    responses: list[httpx.Response | BaseException] = [RuntimeError("not sent")] * len(bodies)

    def send(i: int) -> None:
        with httpx.Client(base_url=url, timeout=60) as client:
            start.wait()
            try:
                responses[i] = client.post(
                    "/api/v1/jobs/",
                    data=bodies[i],
                    files={"data": ("train.csv", b"a,b\n1,2\n")},
                    headers={"Authorization": f"Token {key}", "Idempotency-Key": "nightly-2030-01-01"},
                )
            except BaseException as exc:  # kept, and reported below
                responses[i] = exc

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [r for r in responses if isinstance(r, BaseException)]
    assert not failed, failed
    return responses  # type: ignore[return-value]


@pytest.fixture
def key(transactional_db, member):
    RuntimeImageFactory()
    return token_for(member)


def test_twenty_racing_submits_with_one_key_make_one_job(live_server, key):
    responses = race(live_server.url, key, [submission()] * RACERS)

    assert sorted({r.status_code for r in responses}) in ([200, 201], [201])
    assert [r.status_code for r in responses].count(201) == 1
    assert len({r.json()["id"] for r in responses}) == 1
    assert Job.objects.count() == 1


def test_racing_submits_with_one_key_and_other_bodies_get_422(live_server, key):
    bodies = [submission(cpus="1")] * 10 + [submission(cpus="2")] * 10
    responses = race(live_server.url, key, bodies)

    job = Job.objects.get()
    for body, response in zip(bodies, responses, strict=True):
        if int(body["cpus"]) == job.cpus:
            assert response.status_code in (200, 201) and response.json()["id"] == str(job.pk)
        else:
            assert response.status_code == 422, response.text
