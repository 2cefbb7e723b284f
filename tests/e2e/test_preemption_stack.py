"""Preemption through the real stack: a Celery worker process, PostgreSQL, real containers. A long
scavenger job that fills the node is preempted by an urgent job: it gets SIGTERM, writes a checkpoint, is
released `preempted` with its own record (at cost 0: its team does not pay for it), goes back to the queue
and resumes from its checkpoint."""

from decimal import Decimal

import pytest
from django.db import transaction

from accounting.models import Record
from jobs.history import events_of
from jobs.models import Job, Outcome, OutputFile
from pool.models import Queue
from tests.conftest import wait_for_release, wait_until
from tests.factories import submit_job
from worker.sandbox.base import KILLED

pytestmark = [pytest.mark.docker, pytest.mark.celery]

# Without a checkpoint it works until SIGTERM, then writes one and exits; with one it resumes and finishes.
CHECKPOINTING = (
    "if [ -f /output/checkpoint.txt ]; then echo resumed from $(cat /output/checkpoint.txt); "
    "echo done > /output/result.txt; exit 0; fi; "
    "trap 'echo got SIGTERM; echo step-7 > /output/checkpoint.txt; exit 0' TERM; "
    "echo working; while true; do sleep 0.1; done"
)


def urgent_queue(team) -> Queue:
    """A preempting queue, which names the teams that may use it."""
    queue = Queue.objects.create(name="urgent", priority=10, preempts_lower=True)
    queue.teams.add(team)
    return queue


def submitted(member, team, queue: Queue, **request) -> Job:
    """A job submitted in `queue` (set in the submit's transaction, so no pass sees it without)."""
    with transaction.atomic():
        job = submit_job(member, team, image="busybox", memory_mb=64, time_limit_s=300, **request)
        Job.objects.filter(pk=job.pk).update(queue=queue)
    return job


def test_a_preempted_job_gets_sigterm_keeps_its_outputs_requeues_and_later_succeeds(
    stack, stack_node, api, member, team
):
    scavenger = Queue.objects.create(name="scavenger", priority=-10)
    urgent = urgent_queue(team)
    cores = stack_node.cpus
    long = submitted(member, team, scavenger, cpus=cores, command=["sh", "-c", CHECKPOINTING], name="long")

    def working():
        return "working" in api.get(f"/api/v1/jobs/{long.pk}/logs/").content.decode()

    wait_until(working, 60, 0.2, message=f"job {long.pk} to run and trap SIGTERM")
    first = submitted(member, team, urgent, cpus=cores, command=["echo", "urgent"], name="urgent")

    first = wait_for_release(first, 120)
    long = wait_for_release(long, 120)

    assert (first.outcome, first.attempt) == (Outcome.SUCCEEDED, 1), first.reason
    assert (long.outcome, long.attempt, long.preemptions, long.preempted_by_id) == (
        Outcome.SUCCEEDED, 2, 1, None), long.reason  # fmt: skip
    log = api.get(f"/api/v1/jobs/{long.pk}/logs/").content.decode()
    assert "got SIGTERM" in log and "resumed from step-7" in log, log  # its outputs so far, given back
    assert set(OutputFile.objects.filter(job=long).values_list("path", flat=True)) == {"checkpoint.txt", "result.txt"}
    records = Record.objects.filter(job_id=long.pk).order_by("sequence")
    assert [(r.attempt, r.outcome) for r in records] == [(1, Outcome.PREEMPTED), (2, Outcome.SUCCEEDED)]
    assert records[0].held_seconds > 0 and records[0].cost == Decimal(0)  # held, but not charged
    assert records[1].cost > 0

    body = api.get(f"/api/v1/jobs/{long.pk}/").json()
    assert body["preemptions"] == 1
    assert [(a["attempt"], a["outcome"]) for a in body["attempts"]] == [
        (1, Outcome.PREEMPTED), (2, Outcome.SUCCEEDED)]  # fmt: skip
    assert body["attempts"][0]["reason"] == f"preempted by job {first.pk}"
    [preempted] = [e.reason for e in events_of(long) if e.event == "preempt"]
    [preempting] = [e.reason for e in events_of(first) if e.event == "preempt"]
    assert preempted.startswith(f"preempted by job {first.pk} (queue urgent, team red)")
    assert preempting.startswith(f"preempting job {long.pk} (queue scavenger, team red)")


def test_a_preempted_job_that_ignores_sigterm_is_killed_after_its_grace_and_requeued(
    stack, stack_node, api, member, team
):
    scavenger = Queue.objects.create(name="scavenger", priority=-10)
    urgent = urgent_queue(team)
    cores = stack_node.cpus
    # The command is the container's PID 1, which the kernel shields from a signal it does not handle.
    stubborn = submitted(member, team, scavenger, cpus=cores, command=["sh", "-c", "echo working; sleep 300"])

    def working():
        return "working" in api.get(f"/api/v1/jobs/{stubborn.pk}/logs/").content.decode()

    wait_until(working, 60, 0.2, message=f"job {stubborn.pk} to run")
    first = submitted(member, team, urgent, cpus=cores, command=["echo", "urgent"], name="urgent")

    def requeued():
        stubborn.refresh_from_db()
        return stubborn.attempt == 2

    wait_until(requeued, 90, 0.2, message=f"job {stubborn.pk} to be preempted and requeued")
    [ended] = stubborn.past_attempts
    assert (ended["outcome"], ended["reason"]) == (Outcome.PREEMPTED, f"preempted by job {first.pk}")
    assert ended["exit_code"] == KILLED  # not its own exit: the kill at the end of its grace
    assert wait_for_release(first, 60).outcome == Outcome.SUCCEEDED
