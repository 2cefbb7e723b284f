"""A job's isolation is settled again when its node starts it (jobs.lifecycle.actions.settle_isolation): an
operator may require isolation=strong of a team or an image while its jobs wait."""

import pytest
from django.utils import timezone

from accounting.models import Record
from jobs.lifecycle import actions
from jobs.models import Isolation, Outcome, Stage
from tests.conftest import run_here
from tests.factories import RuntimeImageFactory, submit_job
from tests.jobs.conftest import held
from tests.jobs.test_api import job_url
from worker import runner

WITH_RUNSC = {"runc", "runsc"}
WITHOUT_RUNSC = {"runc"}


def settle(job, runtimes=WITH_RUNSC) -> bool:
    return actions.settle_isolation(job, now=timezone.now(), strong_runtime="runsc", node_runtimes=runtimes)


def test_a_job_queued_before_its_team_required_strong_isolation_runs_strong(member, team, image, local_node, api):
    job = held(submit_job(member, team, image=image))
    team.requires_strong_isolation = True
    team.save(update_fields=["requires_strong_isolation"])

    assert settle(job)

    assert job.isolation == Isolation.STRONG and runner.runtime_for(job) == "runsc"
    job.refresh_from_db()
    assert job.isolation == Isolation.STRONG
    assert api.get(job_url(job)).json()["isolation"] == "strong"


def test_a_job_queued_before_its_image_required_strong_isolation_runs_strong(member, team, local_node):
    untrusted = RuntimeImageFactory(name="untrusted")
    job = held(submit_job(member, team, image=untrusted))
    untrusted.requires_strong_isolation = True
    untrusted.save(update_fields=["requires_strong_isolation"])

    assert settle(job)

    job.refresh_from_db()
    assert job.isolation == Isolation.STRONG


def test_a_job_nothing_requires_strong_isolation_of_stays_standard(member, team, image, local_node):
    job = held(submit_job(member, team, image=image))

    assert settle(job, WITHOUT_RUNSC)

    job.refresh_from_db()
    assert (job.stage, job.isolation) == (Stage.RENT, Isolation.STANDARD)


def test_where_the_node_has_no_strong_runtime_the_job_is_rejected_naming_the_requirement(
    member, team, image, local_node
):
    job = held(submit_job(member, team, image=image))
    team.requires_strong_isolation = True
    team.save(update_fields=["requires_strong_isolation"])

    assert not settle(job, WITHOUT_RUNSC)

    job.refresh_from_db()
    assert (job.stage, job.outcome) == (Stage.RELEASE, Outcome.REJECTED)
    lacks = f"node {local_node.name} has no runsc runtime to run it with"
    assert job.reason == f"the team {team.slug} requires isolation=strong, and {lacks}"
    assert job.active_hold is None and Record.objects.filter(job=job, outcome=Outcome.REJECTED).count() == 1
    assert not actions.start_run(job, now=timezone.now()), "a rejected job is never started"


def test_a_job_that_asked_for_strong_isolation_is_rejected_where_the_node_has_no_strong_runtime(
    member, team, image, local_node
):
    job = held(submit_job(member, team, image=image, isolation=Isolation.STRONG))

    assert not settle(job, WITHOUT_RUNSC)

    job.refresh_from_db()
    assert job.outcome == Outcome.REJECTED and job.reason.startswith("the job requires isolation=strong")


def test_a_job_already_running_is_left_as_it_is(member, team, image, local_node):
    job = held(submit_job(member, team, image=image))
    assert actions.start_run(job, now=timezone.now())
    team.requires_strong_isolation = True
    team.save(update_fields=["requires_strong_isolation"])

    assert settle(job, WITHOUT_RUNSC)

    job.refresh_from_db()
    assert (job.stage, job.isolation) == (Stage.RUN, Isolation.STANDARD)


@pytest.mark.docker
def test_the_node_rejects_a_strong_job_when_its_engine_lacks_the_strong_runtime(
    member, team, images, local_node, settings
):
    settings.E31_STRONG_RUNTIME = "e31-no-such-runtime"  # a runtime this engine does not have
    job = submit_job(member, team, image=images["busybox"], command="echo ran")
    team.requires_strong_isolation = True
    team.save(update_fields=["requires_strong_isolation"])

    job = run_here(job)

    assert (job.stage, job.outcome) == (Stage.RELEASE, Outcome.REJECTED)
    assert "has no e31-no-such-runtime runtime" in job.reason
    assert job.started_at is None, "no container was started"
