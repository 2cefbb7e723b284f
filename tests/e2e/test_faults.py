"""Faults of the machine a job runs on, through the real stack (a Celery worker process, PostgreSQL,
real containers): nothing is stuck, nothing is lost.

- the pool process running a job is killed (SIGKILL), not the worker: the run is taken over;
- PostgreSQL drops every connection of the worker (a restart, a failover): runs and heartbeats go on.
"""

import os
import signal
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from accounting.models import Record
from jobs.models import Job, Outcome, Stage
from jobs.storage.logs import read_log
from pool.models import Node
from tests.conftest import wait_for_release, wait_until
from tests.factories import submit_job

pytestmark = [pytest.mark.docker, pytest.mark.celery]


def log_of(job: Job) -> str:
    return read_log(job.pk)[0].decode(errors="replace")


def running_with(job: Job, text: str) -> Job:
    def ready():
        job.refresh_from_db()
        return job.stage == Stage.RUN and text in log_of(job)

    wait_until(ready, 60, 0.1, message=f"job {job.pk} to run and log {text!r}")
    return job


def children(pid: int) -> list[int]:
    tasks = Path(f"/proc/{pid}/task").iterdir()
    return [int(child) for task in tasks for child in (task / "children").read_text().split()]


def pool_process_running(worker_pid: int, job: Job) -> int:
    """The worker's pool process that runs `job`: the one writing its log in the scratch folder."""
    log = str(Path(settings.E31_SCRATCH_DIR) / str(job.pk) / "log.txt")
    for child in children(worker_pid):
        for fd in Path(f"/proc/{child}/fd").iterdir():
            try:
                if os.readlink(fd) == log:
                    return child
            except OSError:  # closed meanwhile
                continue
    raise AssertionError(f"no pool process of the worker writes {log}")


def test_a_job_whose_pool_process_was_killed_is_taken_over_and_released_once(stack, worker_process, member, team):
    job = submit_job(member, team, image="busybox", command="echo before; sleep 3; echo after")
    running_with(job, "before")

    os.kill(pool_process_running(worker_process.process.pid, job), signal.SIGKILL)

    job = wait_for_release(job, 60)
    assert (job.outcome, job.exit_code) == (Outcome.SUCCEEDED, 0), job.reason
    assert log_of(job) == "before\nafter\n"
    assert Record.objects.filter(job=job).count() == 1
    scratch = Path(settings.E31_SCRATCH_DIR) / str(job.pk)
    wait_until(lambda: not scratch.exists(), 20, message="the scratch folder to be removed after the release")
    assert worker_process.alive(), "the worker itself goes on"


def drop_the_database_connections_of_others() -> int:
    """End every connection to the test database but this test's own, as a PostgreSQL restart would."""
    db = connection.settings_dict
    with psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=db["NAME"], autocommit=True) as own:
        ended = own.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid() AND pid <> %s",
            [db["NAME"], connection.connection.info.backend_pid],
        ).fetchone()[0]
    return ended


def test_runs_and_heartbeats_go_on_when_the_database_drops_the_workers_connections(stack, stack_node, member, team):
    job = submit_job(member, team, image="busybox", command="echo started; sleep 4; echo done")
    running_with(job, "started")
    # A heartbeat while it runs: the heartbeat's connection, if it keeps one, is there to be dropped.
    wait_until(lambda: Node.objects.get(pk=stack_node.pk).last_heartbeat > job.started_at, 20,
               message="a heartbeat while the job runs")  # fmt: skip
    connection.ensure_connection()

    assert drop_the_database_connections_of_others() >= 1  # the run's own, at least: it polls twice a second
    dropped_at = timezone.now()

    job = wait_for_release(job, 60)
    assert (job.outcome, job.exit_code) == (Outcome.SUCCEEDED, 0), job.reason
    assert log_of(job) == "started\ndone\n"
    assert Record.objects.filter(job=job).count() == 1
    wait_until(lambda: Node.objects.get(pk=stack_node.pk).last_heartbeat > dropped_at, 20,
               message="a heartbeat after the connections were dropped")  # fmt: skip

    # And again, between two heartbeats of an idle node.
    drop_the_database_connections_of_others()
    dropped_at = timezone.now()
    wait_until(lambda: Node.objects.get(pk=stack_node.pk).last_heartbeat > dropped_at, 20,
               message="a heartbeat after the connections were dropped again")  # fmt: skip
