"""The watch of a run being preempted: SIGTERM first, the kill at the end of its grace time, sooner when its
team cancels it or the run is no longer this node's."""

from django.utils import timezone

from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Outcome
from tests.factories import submit_job
from worker import runner
from worker.sandbox.base import Exit

POLLS_AFTER = 20  # the polls a run taken away may go on for: a few, never a whole grace time


class Sandbox:
    """A container that exits only once killed; once SIGTERM'd, the run is taken away from this node."""

    def __init__(self, job: Job) -> None:
        self.job, self.terminated, self.killed, self.polls_since = job, False, False, 0

    def reading(self, run_key: str) -> None:
        return None

    def terminate(self, handle: str) -> None:
        self.terminated = True
        # The reaper declared the node lost meanwhile: its next attempt may already run elsewhere.
        Job.objects.filter(pk=self.job.pk).update(attempt=self.job.attempt + 1)

    def stop(self, handle: str) -> None:
        self.killed = True

    def wait(self, handle: str, timeout: float) -> Exit | None:
        if self.killed:
            return Exit(137, False)
        if self.terminated:
            self.polls_since += 1
            assert self.polls_since <= POLLS_AFTER, "a run taken away kept running through its grace time"
        return None


class Pump:
    def flush(self) -> None:
        pass


class Scratch:
    confined = True


def test_a_preempted_run_taken_away_from_its_node_is_killed_at_once(member, team, local_node, settings):
    settings.E31_PREEMPT_GRACE_S = 3600
    job = submit_job(member, team, time_limit_s=7200)
    schedule_pass(now=timezone.now())
    job.refresh_from_db()
    assert actions.start_run(job, now=timezone.now())
    urgent = submit_job(member, team)
    Job.objects.filter(pk=job.pk).update(preempted_by=urgent)
    job.refresh_from_db()
    sandbox = Sandbox(job)

    outcome, _, _ = runner._watch(job, sandbox, "c1", Scratch(), Pump())  # type: ignore[arg-type]

    assert sandbox.terminated and sandbox.killed
    assert outcome == Outcome.NODE_LOST
