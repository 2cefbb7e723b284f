"""Preemption through the real stack: a Celery worker process, PostgreSQL, real containers. A long
scavenger job that fills the node is preempted by an urgent job: it gets SIGTERM, writes a checkpoint, is
released `preempted` with its own record (at cost 0: its team does not pay for it), goes back to the queue
and resumes from its checkpoint. Preempted E31_MAX_PREEMPTIONS times, a job runs to its end."""

from decimal import Decimal

import pytest
from django.db import transaction

from accounting.models import Record
from jobs.lifecycle.history import events_of
from jobs.models import Job, Outcome, OutputFile, Stage
from pool.models import Queue
from tests.conftest import STACK_MAX_PREEMPTIONS, wait_for_release, wait_until
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


def test_a_job_preempted_the_most_times_allowed_runs_on_and_paid_nothing_for_those_attempts(
    stack, stack_node, api, member, team, settings
):
    settings.E31_MAX_PREEMPTIONS = STACK_MAX_PREEMPTIONS  # as the worker's pass has it: the API says the same
    scavenger = Queue.objects.create(name="scavenger", priority=-10)
    urgent = urgent_queue(team)
    cores = stack_node.cpus
    victim = submitted(
        member, team, scavenger, cpus=cores, name="victim",
        command=["sh", "-c", "trap 'echo stopped; exit 0' TERM; echo working; while true; do sleep 0.1; done"],
    )  # fmt: skip

    def working_in(attempt: int):
        def working():
            victim.refresh_from_db()
            log = api.get(f"/api/v1/jobs/{victim.pk}/logs/").content.decode()
            return victim.stage == Stage.RUN and victim.attempt == attempt and log.count("working") == attempt

        return working

    for n in range(1, STACK_MAX_PREEMPTIONS + 1):
        wait_until(working_in(n), 60, 0.2, message=f"attempt {n} of job {victim.pk} to run and trap SIGTERM")
        preemptor = submitted(member, team, urgent, cpus=cores, command=["true"], name=f"urgent {n}")
        assert wait_for_release(preemptor, 90).outcome == Outcome.SUCCEEDED, preemptor.reason
    wait_until(working_in(STACK_MAX_PREEMPTIONS + 1), 60, 0.2, message=f"job {victim.pk} to run once more")
    last = submitted(member, team, urgent, cpus=cores, command=["true"], name="urgent, too late")

    def considered():
        last.refresh_from_db()
        return last.queue_position is not None  # a pass has left it waiting, and did not preempt for it

    wait_until(considered, 30, 0.1, message=f"a pass to leave job {last.pk} waiting")
    victim.refresh_from_db()
    assert (victim.stage, victim.preempted_by_id, victim.preemptions) == (Stage.RUN, None, STACK_MAX_PREEMPTIONS)
    assert "waits for the job it preempted" not in last.wait_reason, last.wait_reason
    body = api.get(f"/api/v1/jobs/{victim.pk}/").json()
    assert (body["preemptions"], body["preemptable"]) == (STACK_MAX_PREEMPTIONS, False)

    assert api.post(f"/api/v1/jobs/{victim.pk}/cancel/").status_code in (200, 202)  # else it runs for its limit
    victim = wait_for_release(victim, 60)
    assert wait_for_release(last, 90).outcome == Outcome.SUCCEEDED
    records = list(Record.objects.filter(job_id=victim.pk).order_by("sequence"))
    assert [(r.attempt, r.outcome, r.cost) for r in records[:-1]] == [
        (n, Outcome.PREEMPTED, Decimal(0)) for n in range(1, STACK_MAX_PREEMPTIONS + 1)]  # fmt: skip
    assert (records[-1].outcome, records[-1].attempt) == (Outcome.CANCELLED, STACK_MAX_PREEMPTIONS + 1)
    assert records[-1].cost > 0  # the attempt it ran to its end (here, its cancel) is charged
