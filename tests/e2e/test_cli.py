"""The `e31` command line end to end: its own process, against a live server, PostgreSQL, a real Celery
worker and real containers. Each outcome of `submit --wait` has its exit code (docs/cli.md)."""

import hashlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.utils import timezone

from jobs.lifecycle import actions
from jobs.lifecycle.history import REAPER
from jobs.models import Job, Stage
from jobs.storage import logs
from pool.models import Node
from pool.nodes import Capacity, register, set_state
from teams.people import token_for
from tests.conftest import STACK_NODE, wait_for_release
from tests.workers import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.celery]
E31 = [sys.executable, "-m", "e31cli"]  # what .venv/bin/e31 runs, from the same interpreter


class Cli:
    def __init__(self, url: str, token: str, home: Path) -> None:
        self.env = {
            **os.environ,
            "E31_URL": url,
            "E31_TOKEN": token,
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "COLUMNS": "250",
        }

    def __call__(self, *args: str, timeout: float = 180, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*E31, *args], env={**self.env, **env}, capture_output=True, text=True, timeout=timeout, check=False
        )

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([*E31, *args], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def cli(stack, live_server, member, tmp_path):
    return Cli(live_server.url, token_for(member), tmp_path)


def read_log(job_id: str) -> str:
    return logs.read_log(uuid.UUID(job_id), 0)[0].decode(errors="replace")


def test_a_job_that_succeeds_exits_0_and_its_outputs_download_verified(cli, tmp_path):
    data = tmp_path / "input.txt"
    data.write_text("hello from the data\n")

    submitted = cli("submit", "--name", "nightly", "--image", "busybox", "--memory", "64M", "--time", "2m",
                    "--data", str(data), "--output", "result.txt", "--env", "GREETING=hi", "--wait", "--",
                    "sh", "-c", 'cat /data/input.txt > /output/result.txt; echo "$GREETING from the job"')  # fmt: skip

    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.splitlines()[0]
    job = Job.objects.get(pk=job_id)
    assert job.outcome == "succeeded" and job.memory_mb == 64 and job.time_limit_s == 120
    assert f"job {job_id}: succeeded" in submitted.stderr

    folder = tmp_path / "outputs"
    downloaded = cli("outputs", job_id, "--download", str(folder))
    assert downloaded.returncode == 0, downloaded.stderr
    content = (folder / "result.txt").read_bytes()
    assert content == b"hello from the data\n"
    assert (
        f"verified result.txt  {len(content)} bytes  sha256 {hashlib.sha256(content).hexdigest()}" in downloaded.stdout
    )
    assert "sha256 verified" in downloaded.stderr

    assert "hi from the job" in cli("logs", job_id).stdout
    shown = json.loads(cli("show", job_id, "--json").stdout)
    assert shown["outcome"] == "succeeded" and shown["env"] == {"GREETING": "hi"}
    listed = json.loads(cli("list", "--outcome", "succeeded", "--since", "1h", "--json").stdout)
    assert [j["id"] for j in listed] == [job_id]

    usage = cli("usage", "--since", "1d", "--json")
    assert usage.returncode == 0, usage.stderr
    records = json.loads(usage.stdout)["records"]
    assert [(r["job"], r["outcome"]) for r in records] == [(job_id, "succeeded")]
    assert job_id in cli("usage").stdout  # the table shows the record too


@pytest.mark.parametrize(
    ("outcome", "code", "request_", "command"),
    [
        ("failed", 1, [], ["sh", "-c", "echo failing; exit 3"]),
        ("timed_out", 3, ["--time", "2s"], ["sleep", "60"]),
        ("out_of_memory", 4, ["--image", "python", "--memory", "64M"], ["python3", "-c", "x = b'x' * (256 << 20)"]),
    ],
)
def test_submit_wait_exits_with_the_code_of_the_outcome(cli, outcome, code, request_, command):
    submitted = cli("submit", "--image", "busybox", "--memory", "128M", *request_, "--wait", "--", *command)

    job_id = submitted.stdout.splitlines()[0]
    assert Job.objects.get(pk=job_id).outcome == outcome
    assert submitted.returncode == code, submitted.stderr
    assert f"job {job_id}: {outcome}" in submitted.stderr
    assert cli("wait", job_id).returncode == code  # `e31 wait` says the same of a released job


def test_a_job_no_node_can_hold_any_more_exits_7(cli):
    # Accepted while an offline node of 64 cores was registered; rejected by the pass after it was removed.
    big = register("big", Capacity(cpu_ids=list(range(64)), memory_mb=1024, gpu_ids=[]), now=timezone.now())
    Node.objects.filter(pk=big.pk).update(state=Node.State.OFFLINE)
    waiting = cli.start("submit", "--image", "busybox", "--cpus", "64", "--wait", "--", "true")
    job_id = waiting.stdout.readline().strip()
    assert Job.objects.get(pk=job_id).stage == Stage.SUBMIT
    big.delete()
    actions.schedule_pass()

    assert waiting.wait(timeout=60) == 7, waiting.stderr.read()
    assert Job.objects.get(pk=job_id).outcome == "rejected"
    assert f"job {job_id}: rejected" in waiting.stderr.read()


def test_a_cancelled_job_exits_5_and_logs_follow_streams_until_release(cli):
    waiting = cli.start("submit", "--image", "busybox", "--wait", "--",
                        "sh", "-c", "echo started; sleep 120")  # fmt: skip
    job_id = waiting.stdout.readline().strip()
    job = Job.objects.get(pk=job_id)
    wait_until(lambda: "started" in read_log(job_id), 60, message="the job to run and log")
    follower = cli.start("logs", job_id, "--follow")

    cancelled = cli("cancel", job_id)

    assert cancelled.returncode == 0 and job_id in cancelled.stdout
    assert waiting.wait(timeout=90) == 5, waiting.stderr.read()
    assert follower.wait(timeout=60) == 0
    assert "started" in follower.stdout.read()
    assert wait_for_release(job).outcome == "cancelled"


def test_a_job_whose_node_is_lost_exits_6(cli, stack_node):
    # Its compute is held on a node no worker serves, then the reaper's action declares that node lost.
    ghost = register("ghost", Capacity(cpu_ids=[0], memory_mb=1024, gpu_ids=[]), now=timezone.now())
    set_state(Node.objects.get(name=STACK_NODE), Node.State.DRAINING, now=timezone.now())
    try:
        waiting = cli.start("submit", "--image", "busybox", "--wait", "--", "true")
        job_id = waiting.stdout.readline().strip()
        wait_until(lambda: Job.objects.get(pk=job_id).stage == Stage.RENT, 60, message="the job to be held")
        job = Job.objects.get(pk=job_id)
        assert job.active_hold.node == ghost
        actions.release_lost(job, node_name="ghost", last_heartbeat=timezone.now(), now=timezone.now(), actor=REAPER)

        assert waiting.wait(timeout=60) == 6, waiting.stderr.read()
    finally:
        set_state(Node.objects.get(name=STACK_NODE), Node.State.ACTIVE, now=timezone.now())


def test_nodes_lists_the_pool(cli):
    nodes = json.loads(cli("nodes", "--json").stdout)

    assert STACK_NODE in [n["name"] for n in nodes]


def test_a_failure_says_why_in_its_own_words_from_wait_show_and_the_api(cli):
    submitted = cli("submit", "--name", "load", "--image", "busybox", "--memory", "64M", "--wait", "--",
                    "sh", "-c", 'echo ok; echo "ERROR: upstream table missing" >&2; exit 3')  # fmt: skip

    assert submitted.returncode == 1, submitted.stderr
    job_id = submitted.stdout.splitlines()[0]
    # After the outcome line, the job's stderr: not its stdout, not the platform's lines.
    ending = submitted.stderr[submitted.stderr.index(f"job {job_id}: failed") :].splitlines()
    assert ending[1:] == ["last lines of its log:", "  ERROR: upstream table missing"], submitted.stderr
    shown = json.loads(cli("show", job_id, "--json").stdout)  # the API's answer
    assert shown["outcome"] == "failed" and shown["exit_code"] == 3
    assert shown["failure_excerpt"] == "ERROR: upstream table missing"
    assert "ERROR: upstream table missing" in cli("show", job_id).stdout
