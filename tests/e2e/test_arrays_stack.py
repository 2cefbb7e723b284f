"""Arrays through the real stack: HTTP, PostgreSQL, real Celery worker processes as nodes, real containers.

The machine has two cores, so the suite's worker alone (node STACK_NODE) could never hold more than two
one-core tasks at once whatever an array's max_running said: a second node, another worker process
lending the same two cores, gives the pool four, and max_running=2 is then the one bound.
"""

from datetime import timedelta

import docker
import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from accounting.models import Record
from jobs.models import Job, Outcome, Stage
from pool.models import Hold, Node
from pool.nodes import detect_capacity, heartbeat, register, set_state
from tests.conftest import ROOT, STACK_NODE, wait_for_release, wait_until, worker_env
from tests.workers import NodeWorker
from worker import reaper
from worker.sandbox.docker import NAMESPACE_LABEL, NODE_LABEL

pytestmark = [pytest.mark.docker, pytest.mark.celery]

SPARE = "arrays2"  # the second node: a worker process of its own, killed by one test
SPARE_HEARTBEAT_S = 1
LOST_S = 3  # above the 2 s heartbeat of the suite's worker, so only a dead node is found silent


@pytest.fixture(scope="module")
def spare_worker(django_db_setup, django_db_blocker, built_images):
    """The second node's worker for the whole module, with its own scratch disk (the store is shared)."""
    from django.db import connection

    env = worker_env(E31_HEARTBEAT_S=str(SPARE_HEARTBEAT_S), E31_SCRATCH_DIR=str(settings.VAR_DIR / f"scratch-{SPARE}"))
    log_path = ROOT / "var" / "log" / f"test-celery-{settings.E31_SANDBOX_NAMESPACE}-{SPARE}.log"
    worker = NodeWorker(SPARE, env=env, log_path=log_path)
    try:
        yield worker.start()
    finally:
        worker.stop()
        # Its heartbeats registered it again after the last flush: the tests of other modules must not
        # see an active node whose worker is gone.
        with django_db_blocker.unblock():
            Node.objects.filter(name=SPARE, holds__isnull=True).delete()
            connection.close()  # else it stays open and the test database cannot be dropped
        engine = docker.from_env(timeout=30)
        labels = [f"{NAMESPACE_LABEL}={settings.E31_SANDBOX_NAMESPACE}", f"{NODE_LABEL}={SPARE}"]
        for container in engine.api.containers(all=True, filters={"label": labels}):
            engine.api.remove_container(container["Id"], force=True)


@pytest.fixture
def two_nodes(stack, spare_worker, settings):
    """The suite's node and the spare one, both active with two cores each."""
    if not spare_worker.alive():
        spare_worker.start()
    register(SPARE, detect_capacity(), now=timezone.now())
    settings.E31_NODE_LOST_S = LOST_S
    yield spare_worker
    # A killed node comes back before the stack's clean-up, which waits for every job to be released.
    if not spare_worker.alive():
        spare_worker.start()


# --- helpers --------------------------------------------------------------------------------------


def submit_array(api, *, command: str, indices: str, max_running: int | None = None, **fields) -> dict:
    body = {
        "name": "sweep", "image": "busybox", "command": command, "cpus": "1", "memory_mb": "64",
        "time_limit_s": "120", "indices": indices, **fields,
    }  # fmt: skip
    if max_running is not None:
        body["max_running"] = str(max_running)
    response = api.post("/api/v1/arrays/", body, format="multipart")
    assert response.status_code == 201, response.content
    return response.json()


def array_of(api, array_id: str) -> dict:
    response = api.get(f"/api/v1/arrays/{array_id}/")
    assert response.status_code == 200, response.content
    return response.json()


def wait_for_array_release(api, array_id: str, timeout: float = 120) -> dict:
    def released():
        body = array_of(api, array_id)
        return body if body["stage"] == Stage.RELEASE else None

    return wait_until(released, timeout, 0.2, message=f"array {array_id} to be released")  # type: ignore[return-value]


def tasks_answer(api, array_id: str) -> list[dict]:
    response = api.get(f"/api/v1/arrays/{array_id}/tasks/")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def tasks_of(array_id: str) -> list[Job]:
    return list(Job.objects.filter(array_id=array_id).order_by("array_index"))


def most_held_at_once(holds: list[Hold]) -> int:
    """The most holds whose [held_at, released_at) overlap at any moment; a release at the instant of a
    hold comes first, as its cores are free for it."""
    moments = sorted([(h.held_at, 1) for h in holds] + [(h.released_at, -1) for h in holds])
    held = most = 0
    for _, delta in moments:
        held += delta
        most = max(most, held)
    return most


def wait_for_tasks(array_id: str, stage: str, count: int, timeout: float = 60) -> list[Job]:
    def there():
        found = list(Job.objects.filter(array_id=array_id, stage=stage))
        return found if len(found) == count else None

    return wait_until(there, timeout, 0.1, message=f"{count} tasks of array {array_id} in {stage}")  # type: ignore[return-value]


# --- tests ----------------------------------------------------------------------------------------


def test_an_array_runs_each_index_once_with_its_env_and_never_more_than_max_running(two_nodes, api):
    assert sum(len(n.cpu_ids) for n in Node.objects.filter(state=Node.State.ACTIVE)) >= 4, "max_running must bind"
    command = "sh -c 'echo $E31_ARRAY_INDEX $E31_ARRAY_SIZE $E31_ARRAY_ID > /output/i.txt; sleep 1'"
    array = submit_array(api, command=command, indices="0-10:2", max_running=2, outputs=["i.txt"])
    assert (array["size"], array["max_running"]) == (6, 2)

    # The tasks beyond max_running wait, and say why; the last cannot be let go before four have ended.
    last = tasks_answer(api, array["id"])[-1]
    assert last["array_index"] == 10 and last["stage"] == Stage.SUBMIT
    assert last["wait_reason"] == f"held back: array {array['id']} lets at most 2 tasks hold compute at once"

    body = wait_for_array_release(api, array["id"])
    assert body["counts"] == {Outcome.SUCCEEDED: 6}, body

    tasks = tasks_of(array["id"])
    assert [t.array_index for t in tasks] == [0, 2, 4, 6, 8, 10]
    for task in tasks:
        assert (task.outcome, task.attempt) == (Outcome.SUCCEEDED, 1), task.reason
        output = api.get(f"/api/v1/jobs/{task.pk}/outputs/i.txt")
        assert output.status_code == 200, output.content
        assert b"".join(output.streaming_content).decode() == f"{task.array_index} 6 {array['id']}\n"
    holds = list(Hold.objects.filter(job__array_id=array["id"]))
    assert sorted(h.job_id for h in holds) == sorted(t.pk for t in tasks), "each index held exactly once"
    assert all(h.released_at is not None for h in holds)
    # The first two were held by one pass, so two did hold compute at once; never three.
    assert most_held_at_once(holds) == 2
    assert Record.objects.filter(job__in=tasks).count() == 6


def test_cancelling_an_array_mid_run_meters_only_the_tasks_that_held_compute(two_nodes, api):
    array = submit_array(api, command="sleep 60", indices="0-4", max_running=2)
    running = wait_for_tasks(array["id"], Stage.RUN, 2)
    assert array_of(api, array["id"])["counts"] == {Stage.RUN: 2, Stage.SUBMIT: 3}

    response = api.post(f"/api/v1/arrays/{array['id']}/cancel/")
    assert response.status_code == 202, response.content

    body = wait_for_array_release(api, array["id"], 60)
    assert body["counts"] == {Outcome.CANCELLED: 5}, body
    assert body["stopped_at"] and "alice" in body["stop_reason"]
    tasks = tasks_of(array["id"])
    held = {t.pk for t in running}
    assert {t.array_index for t in tasks if t.pk in held} == {0, 1}
    for task in tasks:
        holds = Hold.objects.filter(job=task).count()
        records = list(Record.objects.filter(job=task))
        if task.pk in held:
            assert holds == len(records) == 1, (task.array_index, holds, records)
            assert records[0].outcome == Outcome.CANCELLED
        else:
            assert holds == len(records) == 0, (task.array_index, holds, records)
        assert task.outcome == Outcome.CANCELLED


def test_a_worker_killed_mid_array_loses_no_task(two_nodes, api):
    """The spare node's worker dies (SIGKILL) while two tasks run there; the reaper declares the node lost,
    and both tasks run again (retry_on's default, node_lost) on the suite's node, as do the rest."""
    now = timezone.now()
    set_state(Node.objects.get(name=STACK_NODE), Node.State.DRAINING, now=now)  # the first two run on the spare
    array = submit_array(api, command="sleep 3", indices="0-3", max_running=2, max_retries="1")
    first = wait_for_tasks(array["id"], Stage.RUN, 2)
    assert {t.active_hold.node.name for t in first} == {SPARE}
    started = max(t.started_at for t in first)
    # A heartbeat after the runs started, so the meter has something to stop at besides the holds.
    wait_until(lambda: Node.objects.filter(name=SPARE, last_heartbeat__gt=started).exists(), 10,
               message="a heartbeat of the spare node while its tasks run")  # fmt: skip

    two_nodes.kill()
    set_state(Node.objects.get(name=STACK_NODE), Node.State.ACTIVE, now=timezone.now())
    silent_since = Node.objects.get(name=SPARE).last_heartbeat
    wait_until(lambda: timezone.now() - silent_since > timedelta(seconds=LOST_S), 10, message="the spare to be silent")
    heartbeat(STACK_NODE, now=timezone.now())  # so that only the spare can be found silent
    assert reaper.reap_lost_nodes(now=timezone.now()) == [SPARE]

    body = wait_for_array_release(api, array["id"])
    assert body["counts"] == {Outcome.SUCCEEDED: 4}, body
    lost = {t.pk for t in first}
    for task in tasks_of(array["id"]):
        holds = list(Hold.objects.filter(job=task).order_by("held_at").select_related("node"))
        records = list(Record.objects.filter(job=task).order_by("sequence"))
        assert task.outcome == Outcome.SUCCEEDED, task.reason
        if task.pk in lost:
            assert task.attempt == 2
            assert [(h.node.name, h.attempt) for h in holds] == [(SPARE, 1), (STACK_NODE, 2)]
            assert [(r.node, r.outcome) for r in records] == [
                (SPARE, Outcome.NODE_LOST),
                (STACK_NODE, Outcome.SUCCEEDED),
            ]
            assert holds[0].released_at == silent_since
        else:
            assert task.attempt == 1
            assert [(h.node.name, h.attempt) for h in holds] == [(STACK_NODE, 1)]
            assert [(r.node, r.outcome) for r in records] == [(STACK_NODE, Outcome.SUCCEEDED)]
        attempts = api.get(f"/api/v1/jobs/{task.pk}/").json()["attempts"]
        assert [a["outcome"] for a in attempts] == (
            [Outcome.NODE_LOST, Outcome.SUCCEEDED] if task.pk in lost else [Outcome.SUCCEEDED]
        )
    # A retried task still counts against max_running while it waits for its next attempt.
    assert most_held_at_once(list(Hold.objects.filter(job__array_id=array["id"]))) <= 2


def test_an_array_stops_after_its_failures_and_its_failed_tasks_run_again_in_a_new_array(two_nodes, api):
    command = "sh -c 'echo $E31_ARRAY_INDEX; test $E31_ARRAY_INDEX -ne 1'"
    array = submit_array(api, command=command, indices="0-3", max_running=1, stop_after_failures="1")

    body = wait_for_array_release(api, array["id"], 60)
    assert body["counts"] == {Outcome.SUCCEEDED: 1, Outcome.FAILED: 1, Outcome.CANCELLED: 2}, body
    assert body["stop_reason"] == "1 tasks failed (stop_after_failures=1)" and body["stopped_at"]
    tasks = tasks_of(array["id"])
    assert [t.outcome for t in tasks] == [Outcome.SUCCEEDED, Outcome.FAILED, Outcome.CANCELLED, Outcome.CANCELLED]
    assert not Hold.objects.filter(job__in=tasks[2:]).exists(), "the rest were cancelled before any held compute"
    assert tasks[2].reason == body["stop_reason"]

    response = api.post(f"/api/v1/arrays/{array['id']}/resubmit/?only=failed")
    assert response.status_code == 201, response.content
    again = response.json()
    assert (again["size"], again["resubmitted_from"]) == (1, array["id"])
    body = wait_for_array_release(api, again["id"], 60)
    assert body["counts"] == {Outcome.FAILED: 1}, body
    [task] = tasks_of(again["id"])
    assert task.array_index == 1 and task.env["E31_ARRAY_ID"] == again["id"]
    assert api.get(f"/api/v1/jobs/{task.pk}/logs/").content == b"1\n"


def test_a_pipeline_stages_data_and_upstream_outputs_for_every_task_and_waits_for_the_whole_array(two_nodes, api):
    response = api.post(
        "/api/v1/jobs/",
        {"name": "prepare", "image": "busybox", "command": "sh -c 'echo split > /output/split.txt'", "cpus": "1",
         "memory_mb": "64", "time_limit_s": "60"},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    prepare = response.json()["id"]
    command = f"sh -ec 'cat /data/params.txt /data/from/{prepare}/split.txt > /output/seen.txt; echo $E31_ARRAY_INDEX'"
    params = SimpleUploadedFile("params.txt", b"lr=0.1\n")
    array = submit_array(
        api, command=command, indices="0-2", outputs=["seen.txt"], after_ok=prepare,
        inputs_from=f"{prepare}:split.txt", data=[params],
    )  # fmt: skip
    response = api.post(
        "/api/v1/jobs/",
        {"name": "evaluate", "image": "busybox", "command": "true", "cpus": "1", "memory_mb": "64",
         "time_limit_s": "60", "after_ok": array["id"]},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    evaluate = response.json()["id"]

    body = wait_for_array_release(api, array["id"])
    assert body["counts"] == {Outcome.SUCCEEDED: 3}, body
    prepared = Job.objects.get(pk=prepare)
    tasks = tasks_of(array["id"])
    for task in tasks:
        assert task.held_at >= prepared.released_at, "no task before its upstream succeeded"
        output = api.get(f"/api/v1/jobs/{task.pk}/outputs/seen.txt")
        assert output.status_code == 200, (task.array_index, task.reason)
        assert b"".join(output.streaming_content) == b"lr=0.1\nsplit\n"
    evaluated = wait_for_release(Job.objects.get(pk=evaluate), 60)
    assert evaluated.outcome == Outcome.SUCCEEDED, evaluated.reason
    assert evaluated.held_at >= max(t.released_at for t in tasks), "after the whole array, not its first task"
