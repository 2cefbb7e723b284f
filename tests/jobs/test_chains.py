"""Dependencies (jobs.lifecycle.chains): a job waits, held back, for the jobs and arrays it names, and is cancelled
with the reason when what it waits for can never come."""

from datetime import timedelta

from jobs.lifecycle.actions import schedule_pass
from jobs.models import Dependency, Job, Outcome, Stage
from tests.factories import run_to_release, submit_array_of, submit_job
from tests.jobs.conftest import T0

LATER = T0 + timedelta(minutes=1)
OK, ANY, NOT_OK = Dependency.Kind.OK, Dependency.Kind.ANY, Dependency.Kind.NOT_OK


def ran(job: Job, outcome: str = Outcome.SUCCEEDED) -> Job:
    schedule_pass(now=T0)
    job.refresh_from_db()
    return run_to_release(job, now=LATER, outcome=outcome, exit_code=0 if outcome == Outcome.SUCCEEDED else 1)


def fresh(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def test_a_dependent_waits_held_back_naming_what_it_waits_for(member, team, image, local_node):
    a = submit_job(member, team, image=image)
    b = submit_job(member, team, image=image, after=[(OK, a)])

    schedule_pass(now=T0)

    assert fresh(a).stage == Stage.RENT
    assert fresh(b).stage == Stage.SUBMIT and fresh(b).held_back
    assert fresh(b).wait_reason == f"waits for job {a.pk} to succeed"


def test_after_ok_lets_the_job_go_once_its_upstream_succeeded(member, team, image, local_node):
    a = submit_job(member, team, image=image)
    b = submit_job(member, team, image=image, after=[(OK, a)])
    ran(a)

    schedule_pass(now=LATER)

    assert fresh(b).stage == Stage.RENT


def test_a_failure_cancels_the_whole_chain_below_it_with_reasons(member, team, image, local_node):
    a = submit_job(member, team, image=image)
    b = submit_job(member, team, image=image, after=[(OK, a)])
    c = submit_job(member, team, image=image, after=[(OK, b)])
    ran(a, Outcome.FAILED)

    schedule_pass(now=LATER)

    b, c = fresh(b), fresh(c)
    assert (b.stage, b.outcome) == (Stage.RELEASE, Outcome.CANCELLED)
    assert f"job {a.pk} ended failed (after_ok)" in b.reason
    assert (c.stage, c.outcome) == (Stage.RELEASE, Outcome.CANCELLED)
    assert f"job {b.pk} ended cancelled (after_ok)" in c.reason


def test_after_not_ok_runs_only_on_failure(member, team, image, local_node):
    good, bad = submit_job(member, team, image=image), submit_job(member, team, image=image)
    on_good = submit_job(member, team, image=image, after=[(NOT_OK, good)])
    on_bad = submit_job(member, team, image=image, after=[(NOT_OK, bad)])
    ran(good)
    ran(bad, Outcome.FAILED)

    schedule_pass(now=LATER)

    assert fresh(on_good).outcome == Outcome.CANCELLED and "succeeded (after_not_ok)" in fresh(on_good).reason
    assert fresh(on_bad).stage == Stage.RENT


def test_after_any_runs_however_its_upstream_ended(member, team, image, local_node):
    a = submit_job(member, team, image=image)
    b = submit_job(member, team, image=image, after=[(ANY, a)])
    ran(a, Outcome.FAILED)

    schedule_pass(now=LATER)

    assert fresh(b).stage == Stage.RENT


def test_a_job_submitted_after_its_upstream_ended_is_settled_by_the_next_pass(member, team, image, local_node):
    a = ran(submit_job(member, team, image=image), Outcome.FAILED)
    b = submit_job(member, team, image=image, after=[(OK, a)])

    schedule_pass(now=LATER)

    assert fresh(b).outcome == Outcome.CANCELLED


def test_an_array_waits_for_its_dependency_and_an_after_ok_on_an_array_needs_every_task(
    member, team, image, local_node
):
    first = submit_array_of(member, team, range(2), image=image)
    then = submit_array_of(member, team, range(2), image=image, after=[(OK, first)])
    assert Job.objects.filter(array=then, held_back=True).count() == 2
    schedule_pass(now=T0)
    one, two = Job.objects.filter(array=first).order_by("array_index")
    run_to_release(one, now=LATER)
    schedule_pass(now=LATER)
    assert Job.objects.filter(array=then, held_back=True).count() == 2  # one task of `first` is still running

    run_to_release(two, now=LATER)
    schedule_pass(now=LATER)

    assert Job.objects.filter(array=then, held_back=False).count() == 2


def test_a_failed_task_dooms_the_after_ok_dependents_of_its_array_at_once(member, team, image, local_node):
    first = submit_array_of(member, team, range(2), image=image)
    after = submit_job(member, team, image=image, after=[(OK, first)])
    schedule_pass(now=T0)
    one = Job.objects.get(array=first, array_index=0)
    run_to_release(one, now=LATER, outcome=Outcome.FAILED, exit_code=1)

    schedule_pass(now=LATER)

    assert fresh(after).outcome == Outcome.CANCELLED
    assert f"array {first.pk} has a task that did not succeed (after_ok)" in fresh(after).reason
