"""A run whose watcher dies is taken over: the process running a job is killed (SIGKILL, as the OOM
killer or an operator would), and the next delivery of the run finds its container by its labels,
follows it to its end under the same time limit, and releases the job once, with what really
happened.

The watcher is a real process: a fork of this one running worker.runner.run, killed mid-run; its
container, scratch folder and database rows are left exactly as the kill left them.
"""

import multiprocessing
import os
import signal
from datetime import timedelta

import docker
import pytest
from django.db import connections
from django.utils import timezone

from accounting.models import Record
from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Outcome, OutputFile, Stage
from jobs.storage.logs import is_sealed
from pool.nodes import detect_capacity, register
from tests.conftest import wait_until
from tests.factories import submit_job
from tests.worker.test_sandbox_docker import assert_released_and_cleaned, containers_of, log_of
from worker import runner
from worker.sandbox import get_sandbox

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def engine():
    return docker.from_env(timeout=30)


NODE = "takeover"  # not the node of the suite's worker process, whose watchdog would take these runs


@pytest.fixture
def ready(transactional_db, member, team, images):
    """Committed data (the watcher is another process), this machine as a node, the images."""
    register(NODE, detect_capacity(), now=timezone.now())
    return member, team


def held(job: Job) -> Job:
    schedule_pass(now=timezone.now())
    job.refresh_from_db()
    assert job.stage == Stage.RENT and job.active_hold.node.name == NODE
    return job


def _watch_here(job_id: str, node_name: str, crash_on_release: bool) -> None:
    """The watcher: what the node's pool process does with a run (in a forked child)."""
    if crash_on_release:

        def die(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)

        actions.release = die  # this process only: it dies after collecting, before releasing
    runner.run(job_id, node_name=node_name)


def watcher_of(job: Job, *, crash_on_release: bool = False) -> multiprocessing.Process:
    """Start a process that runs the job as the node's worker would."""
    args = (str(job.pk), job.active_hold.node.name, crash_on_release)
    connections.close_all()  # the child opens its own: a shared socket would cross the two sessions
    process = multiprocessing.get_context("fork").Process(target=_watch_here, args=args, daemon=True)
    process.start()
    return process


def kill(process: multiprocessing.Process) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.join(10)
    assert process.exitcode == -signal.SIGKILL


def running_with(engine, job: Job, text: str) -> Job:
    """Until the job's container runs and its log has `text`."""

    def ready():
        job.refresh_from_db()
        running = containers_of(engine, job, status="running")
        return job.stage == Stage.RUN and running and text in log_of(job)

    wait_until(ready, 30, 0.1, message=f"job {job.pk} to run and log {text!r}")
    return job


def test_a_run_whose_watcher_was_killed_is_taken_over_and_ends_as_its_container_did(ready, engine):
    member, team = ready
    job = held(submit_job(member, team, image="busybox", command="echo before; sleep 2; echo after > /output/a.txt"))
    watcher = watcher_of(job)
    running_with(engine, job, "before")

    kill(watcher)
    assert Job.objects.get(pk=job.pk).stage == Stage.RUN, "nobody finishes the run of a dead watcher by itself"
    runner.run(job.pk, node_name=job.active_hold.node.name)  # its next delivery

    job.refresh_from_db()
    assert_released_and_cleaned(engine, job, Outcome.SUCCEEDED)
    assert log_of(job) == "before\n", "the log is whole, and nothing in it twice"
    assert list(OutputFile.objects.filter(job=job).values_list("path", flat=True)) == ["a.txt"]


def test_a_taken_over_run_past_its_time_limit_is_killed_and_metered_only_to_the_limit_and_the_overhead(
    ready, engine, settings
):
    settings.E31_HOLD_OVERHEAD_S = 1
    member, team = ready
    job = held(submit_job(member, team, image="busybox", command="echo started; sleep 300", time_limit_s=2))
    watcher = watcher_of(job)
    running_with(engine, job, "started")
    kill(watcher)
    # Nobody watched it past its time limit and the overhead (the next delivery came late).
    limit = job.held_at + timedelta(seconds=2 + 1)
    wait_until(lambda: timezone.now() > limit + timedelta(seconds=1), 10, message="the time limit and overhead to pass")

    runner.run(job.pk, node_name=job.active_hold.node.name)

    job.refresh_from_db()
    record = assert_released_and_cleaned(engine, job, Outcome.TIMED_OUT)
    assert "ran past its time limit of 2s" in job.reason
    assert record.released_at <= limit < job.released_at, "the meter stopped at the time limit and the overhead"
    assert "started" in log_of(job)


def test_a_run_whose_container_vanished_is_released_failed_with_what_its_scratch_held(ready, engine):
    member, team = ready
    command = "echo partial > /output/partial.txt; echo started; sleep 300"
    job = held(submit_job(member, team, image="busybox", command=command))
    watcher = watcher_of(job)
    running_with(engine, job, "started")
    kill(watcher)
    for container in containers_of(engine, job):
        container.remove(force=True)

    runner.run(job.pk, node_name=job.active_hold.node.name)

    job.refresh_from_db()
    assert_released_and_cleaned(engine, job, Outcome.FAILED)
    assert job.reason == "the node lost track of the run: its container is gone"
    assert list(OutputFile.objects.filter(job=job).values_list("path", flat=True)) == ["partial.txt"]
    assert "started" in log_of(job)


def test_a_second_delivery_while_the_run_is_watched_does_nothing(ready, engine, monkeypatch):
    monkeypatch.setattr(runner, "LOCK_WAIT_S", 0.2)
    member, team = ready
    job = held(submit_job(member, team, image="busybox", command="echo started; sleep 300"))
    watcher = watcher_of(job)
    running_with(engine, job, "started")

    runner.run(job.pk, node_name=job.active_hold.node.name)

    job.refresh_from_db()
    assert job.stage == Stage.RUN and len(containers_of(engine, job, status="running")) == 1
    actions.cancel(job, now=timezone.now())  # its watcher stops it and releases it
    watcher.join(30)
    job.refresh_from_db()
    assert_released_and_cleaned(engine, job, Outcome.CANCELLED)


def test_a_run_cut_off_after_its_outputs_were_collected_is_collected_again_and_released_once(ready, engine):
    member, team = ready
    command = "echo hello; echo 1 > /output/a.txt; ln -s /etc/passwd /output/passwd"
    job = held(submit_job(member, team, image="busybox", command=command))
    watcher = watcher_of(job, crash_on_release=True)
    watcher.join(30)
    assert watcher.exitcode == -signal.SIGKILL
    job.refresh_from_db()
    assert job.stage == Stage.OUTPUT and not is_sealed(job.pk) and OutputFile.objects.filter(job=job).count() == 1

    runner.run(job.pk, node_name=job.active_hold.node.name)

    job.refresh_from_db()
    assert_released_and_cleaned(engine, job, Outcome.SUCCEEDED)
    assert list(OutputFile.objects.filter(job=job).values_list("path", flat=True)) == ["a.txt"]
    assert log_of(job) == "hello\n[e31] refused outputs: passwd (symlink)\n", "the system's notes once"
    assert job.reason == "refused outputs: passwd (symlink)"
    assert Record.objects.filter(job=job).count() == 1


def _report_own_client(parent_client_id: int) -> None:
    os._exit(0 if id(get_sandbox()) != parent_client_id else 1)


def test_a_forked_pool_process_makes_its_own_engine_client(engine):
    # A pool process shares nothing of the worker's engine client: requests would cross on one socket.
    child = multiprocessing.get_context("fork").Process(target=_report_own_client, args=(id(get_sandbox()),))
    child.start()
    child.join(10)
    assert child.exitcode == 0
