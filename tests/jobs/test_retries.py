"""Retry rules (jobs.lifecycle.retries through jobs.lifecycle.actions): which ends go back to the queue, with how
much memory and
after how long; every attempt keeps its own hold, record and events."""

from datetime import timedelta
from decimal import Decimal

from accounting.models import Budget, BudgetUnit, BudgetWarning, Record
from jobs.lifecycle.actions import release_lost, schedule_pass
from jobs.lifecycle.history import REAPER
from jobs.lifecycle.retries import attempts_of
from jobs.models import Job, Outcome, Stage
from jobs.scheduling import dispatch
from jobtemplates.models import JobTemplate
from tests.factories import run_to_release, submit_job
from tests.jobs.conftest import T0

LATER = T0 + timedelta(minutes=1)


def held(job: Job, now=T0) -> Job:
    schedule_pass(now=now)
    job.refresh_from_db()
    assert job.stage == Stage.RENT
    return job


def test_out_of_memory_retries_with_more_memory_and_both_attempts_have_records(member, team, image, local_node):
    job = submit_job(
        member, team, image=image, memory_mb=64, max_retries=2, retry_on=["out_of_memory"], retry_memory_factor=2
    )
    run_to_release(held(job), now=LATER, outcome=Outcome.OUT_OF_MEMORY, exit_code=137)

    job.refresh_from_db()
    assert (job.stage, job.attempt, job.memory_mb) == (Stage.SUBMIT, 2, 128)
    run_to_release(held(job, LATER), now=LATER + timedelta(seconds=30))

    job.refresh_from_db()
    assert job.outcome == Outcome.SUCCEEDED
    assert [(r.attempt, r.outcome, r.memory_mb) for r in Record.objects.filter(job_id=job.pk).order_by("attempt")] == [
        (1, Outcome.OUT_OF_MEMORY, 64),
        (2, Outcome.SUCCEEDED, 128),
    ]
    attempts = attempts_of(job)
    assert [(a["attempt"], a["outcome"], a["exit_code"], a["memory_mb"]) for a in attempts] == [
        (1, Outcome.OUT_OF_MEMORY, 137, 64),
        (2, Outcome.SUCCEEDED, 0, 128),
    ]
    assert all(a["held_at"] and a["released_at"] for a in attempts)


def test_submitting_a_retried_job_again_starts_from_the_memory_its_team_asked(client, member, team, image, local_node):
    """The resubmit form and a template saved from the job ask the first attempt's memory, as an array's
    resubmit does: the retry's larger memory was the platform's answer to one run."""
    job = submit_job(
        member, team, image=image, memory_mb=64, max_retries=2, retry_on=["out_of_memory"], retry_memory_factor=2
    )
    run_to_release(held(job), now=LATER, outcome=Outcome.OUT_OF_MEMORY, exit_code=137)
    assert Job.objects.get(pk=job.pk).memory_mb == 128
    client.force_login(member)

    form = client.get(f"/jobs/{job.pk}/resubmit/").context["form"]
    client.post(f"/jobs/{job.pk}/save-template/")

    assert form["memory_mb"].value() == 64
    assert JobTemplate.objects.get(team=team).memory_mb == 64


def test_memory_grows_no_further_than_the_largest_node(member, team, image, local_node):
    job = submit_job(
        member, team, image=image, memory_mb=local_node.memory_mb // 2 + 1, max_retries=1,
        retry_on=["out_of_memory"], retry_memory_factor=4,
    )  # fmt: skip
    run_to_release(held(job), now=LATER, outcome=Outcome.OUT_OF_MEMORY, exit_code=137)

    assert Job.objects.get(pk=job.pk).memory_mb == local_node.memory_mb


def test_an_exit_code_named_retries_and_one_not_named_ends_the_job(member, team, image, local_node):
    named = submit_job(member, team, image=image, max_retries=1, retry_on=["3"])
    run_to_release(held(named), now=LATER, outcome=Outcome.FAILED, exit_code=3)
    assert Job.objects.get(pk=named.pk).stage == Stage.SUBMIT

    other = submit_job(member, team, image=image, max_retries=1, retry_on=["3"])
    run_to_release(held(other, LATER), now=LATER, outcome=Outcome.FAILED, exit_code=4)
    assert Job.objects.get(pk=other.pk).outcome == Outcome.FAILED


def test_retries_stop_when_attempts_run_out(member, team, image, local_node):
    job = submit_job(member, team, image=image, max_retries=1, retry_on=["failed"])
    run_to_release(held(job), now=LATER, outcome=Outcome.FAILED, exit_code=1)
    run_to_release(held(job, LATER), now=LATER + timedelta(seconds=5), outcome=Outcome.FAILED, exit_code=1)

    job.refresh_from_db()
    assert (job.stage, job.attempt, job.outcome) == (Stage.RELEASE, 2, Outcome.FAILED)
    assert Record.objects.filter(job_id=job.pk).count() == 2


def test_a_retry_waits_out_its_delay_doubling_each_attempt(member, team, image, local_node):
    job = submit_job(member, team, image=image, max_retries=2, retry_on=["failed"], retry_delay_s=60)
    run_to_release(held(job), now=LATER, outcome=Outcome.FAILED, exit_code=1)
    job.refresh_from_db()
    assert job.not_before is not None and "waits for its retry delay" in job.wait_reason

    assert schedule_pass(now=LATER) == []  # the pass reads the clock: the delay is still running
    Job.objects.filter(pk=job.pk).update(not_before=T0)
    run_to_release(held(job, LATER), now=LATER, outcome=Outcome.FAILED, exit_code=1)
    job.refresh_from_db()
    assert job.attempt == 3 and (job.not_before - LATER) == timedelta(seconds=120)


def test_a_lost_node_is_not_retried_when_the_rules_leave_it_out(member, team, image, local_node):
    job = held(submit_job(member, team, image=image, max_retries=2, retry_on=["failed"]))

    release_lost(job, node_name=local_node.name, last_heartbeat=T0, now=LATER, actor=REAPER)

    assert Job.objects.get(pk=job.pk).outcome == Outcome.NODE_LOST


def test_a_delayed_retry_asks_for_a_pass_when_its_delay_ends(
    member, team, image, local_node, monkeypatch, django_capture_on_commit_callbacks
):
    sent = []
    monkeypatch.setattr(dispatch, "send", lambda task, *, args=None, queue=None, eta=None: sent.append((task, eta)))
    job = held(submit_job(member, team, image=image, max_retries=1, retry_on=["failed"], retry_delay_s=30))

    with django_capture_on_commit_callbacks(execute=True):
        run_to_release(job, now=LATER, outcome=Outcome.FAILED, exit_code=1)

    assert (dispatch.SCHEDULE_TASK, LATER + timedelta(seconds=30)) in sent


def test_an_attempt_whose_record_crosses_the_budget_warns_whether_or_not_it_is_retried(
    member, team, image, local_node, settings
):
    settings.E31_HOLD_OVERHEAD_S = 0
    # A minute of one core is 83% of the month; another attempt's worst case would pass the budget.
    Budget.objects.create(team=team, unit=BudgetUnit.CORE_HOURS, monthly=Decimal("0.02"))
    job = submit_job(member, team, image=image, time_limit_s=70, max_retries=1, retry_on=["failed"])

    run_to_release(held(job), now=LATER, outcome=Outcome.FAILED, exit_code=1)

    job.refresh_from_db()
    assert job.stage == Stage.RELEASE and "not retried" in job.reason
    assert list(BudgetWarning.objects.values_list("team", "level")) == [(team.pk, 80)]
