"""`e31` with arrays end to end: its own process, against a live server, PostgreSQL, a real Celery worker and
real containers. `submit --array … --wait` and `wait` of an array exit 0 only when every task succeeded."""

import json
import uuid

import pytest

from jobs.models import Job
from jobs.storage import logs
from teams.people import token_for
from tests.e2e.test_cli import Cli

pytestmark = [pytest.mark.docker, pytest.mark.celery]


@pytest.fixture
def cli(stack, live_server, member, tmp_path):
    return Cli(live_server.url, token_for(member), tmp_path)


def tasks_of(array_id: str) -> list[Job]:
    return list(Job.objects.filter(array_id=array_id).order_by("array_index"))


def test_an_array_submitted_with_wait_exits_0_and_array_shows_its_counts(cli):
    submitted = cli("submit", "--name", "sweep", "--image", "busybox", "--memory", "64M", "--time", "1m",
                    "--array", "0-3%2", "--wait", "--",
                    "sh", "-c", 'echo "task $E31_ARRAY_INDEX of $E31_ARRAY_SIZE in $E31_ARRAY_ID"')  # fmt: skip

    assert submitted.returncode == 0, submitted.stderr
    array_id = submitted.stdout.splitlines()[0]
    assert f"array {array_id}: 4 succeeded" in submitted.stderr
    tasks = tasks_of(array_id)
    assert [(t.array_index, t.outcome) for t in tasks] == [(i, "succeeded") for i in range(4)]
    for task in tasks:
        log = logs.read_log(uuid.UUID(str(task.pk)), 0)[0].decode()
        assert f"task {task.array_index} of 4 in {array_id}" in log

    shown = json.loads(cli("array", array_id, "--json").stdout)
    assert shown["size"] == 4 and shown["max_running"] == 2 and shown["stage"] == "release"
    assert shown["counts"] == {"succeeded": 4}
    table = cli("array", array_id)
    assert table.returncode == 0, table.stderr
    rows = [line.split() for line in table.stdout.splitlines()]
    assert ["size", "4"] in rows and ["max", "running", "2"] in rows and ["succeeded", "4"] in rows
    assert cli("wait", array_id).returncode == 0  # a released array says the same again

    task = cli("show", str(tasks[2].pk))
    assert f"array {array_id} index 2" in " ".join(task.stdout.split())


def test_an_array_with_a_failed_task_makes_wait_exit_1_and_tasks_name_it(cli):
    submitted = cli("submit", "--name", "half", "--image", "busybox", "--memory", "64M", "--time", "1m",
                    "--array", "0-2", "--", "sh", "-c", 'test "$E31_ARRAY_INDEX" != 1')  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    array_id = submitted.stdout.strip()

    waited = cli("wait", array_id)

    assert waited.returncode == 1, waited.stderr
    assert f"array {array_id}: 2 succeeded, 1 failed" in waited.stderr
    assert [(t.array_index, t.outcome) for t in tasks_of(array_id)] == [(0, "succeeded"), (1, "failed"),
                                                                        (2, "succeeded")]  # fmt: skip
    failed = json.loads(cli("array", array_id, "--tasks", "--outcome", "failed", "--json").stdout)
    assert [(t["array_index"], t["exit_code"]) for t in failed] == [(1, 1)]


def test_a_job_after_a_failed_one_is_cancelled_and_wait_says_so(cli):
    first = cli("submit", "--image", "busybox", "--memory", "64M", "--", "false")
    first_id = first.stdout.strip()
    second = cli("submit", "--image", "busybox", "--memory", "64M", "--after", f"ok:{first_id}", "--", "true")
    assert second.returncode == 0, second.stderr
    second_id = second.stdout.strip()

    assert cli("wait", first_id).returncode == 1
    waited = cli("wait", second_id)

    assert waited.returncode == 5, waited.stderr  # cancelled: its dependency can no longer be met
    assert first_id in Job.objects.get(pk=second_id).reason


def test_a_job_retried_on_its_exit_code_shows_both_attempts(cli):
    submitted = cli("submit", "--image", "busybox", "--memory", "64M", "--retry", "1", "--retry-on", "3,timed_out",
                    "--wait", "--", "sh", "-c", "exit 3")  # fmt: skip

    assert submitted.returncode == 1, submitted.stderr
    job_id = submitted.stdout.splitlines()[0]
    shown = cli("show", job_id)
    lines = [" ".join(line.split()) for line in shown.stdout.splitlines()]
    at = next(i for i, line in enumerate(lines) if line.startswith("attempts "))
    assert lines[at].startswith("attempts #1 failed (exit 3), 64 MB, held ")
    assert lines[at + 1].startswith("#2 failed (exit 3), 64 MB, held ")
    assert json.loads(cli("show", job_id, "--json").stdout)["retry_on"] == ["3", "timed_out"]
