"""isolation=strong: asked for in the form and the API, required per team or per image, and the
runtime that ran each attempt kept on its hold and shown beside its record."""

import pytest
from django.utils import timezone

from jobs.lifecycle import actions
from jobs.models import Isolation, Job
from tests.factories import RuntimeImageFactory, submit_job
from tests.jobs.conftest import held
from tests.jobs.test_api import job_url, post_job
from tests.jobs.test_submission_schema import submission_component
from worker import runner


@pytest.fixture
def image(db):
    return RuntimeImageFactory()


def test_a_job_runs_with_standard_isolation_unless_it_asks(api, image, local_node):
    response = post_job(api)

    assert response.status_code == 201, response.json()
    assert response.json()["isolation"] == "standard"
    assert Job.objects.get().isolation == Isolation.STANDARD


def test_a_job_may_ask_for_strong_isolation(api, image, local_node):
    response = post_job(api, isolation="strong")

    assert response.status_code == 201, response.json()
    assert response.json()["isolation"] == "strong"
    assert runner.runtime_for(Job.objects.get()) == "runsc"


def test_an_unknown_isolation_is_a_field_error(api, image, local_node):
    response = post_job(api, isolation="paranoid")

    assert response.status_code == 400
    assert list(response.json()) == ["isolation"]
    assert not Job.objects.exists()


def test_a_team_that_requires_strong_isolation_gets_it_and_may_not_ask_for_less(api, team, image, local_node):
    team.requires_strong_isolation = True
    team.save(update_fields=["requires_strong_isolation"])

    unsaid = post_job(api)
    refused = post_job(api, isolation="standard")

    assert unsaid.status_code == 201 and unsaid.json()["isolation"] == "strong"
    assert refused.status_code == 400
    assert refused.json() == {"isolation": ["The team red requires isolation=strong."]}


def test_an_image_that_requires_strong_isolation_gets_it_for_every_team(api, local_node):
    RuntimeImageFactory(name="untrusted", reference="e31/busybox:1", requires_strong_isolation=True)

    unsaid = post_job(api, image="untrusted")
    refused = post_job(api, image="untrusted", isolation="standard")

    assert unsaid.status_code == 201 and unsaid.json()["isolation"] == "strong"
    assert refused.json() == {"isolation": ["The image untrusted requires isolation=strong."]}


def test_the_browser_form_offers_the_choice(client, member, image):
    client.force_login(member)

    page = client.get("/jobs/new/").content.decode()

    assert 'name="isolation"' in page and 'value="strong"' in page


def test_the_openapi_request_lists_the_isolation_choices(api):
    submission = submission_component(api)

    assert submission["properties"]["isolation"]["enum"] == ["standard", "strong"]
    assert "isolation" not in submission["required"]


def test_the_runtime_that_ran_an_attempt_is_kept_on_its_hold_and_shown(member, team, image, local_node, api):
    job = held(submit_job(member, team, isolation=Isolation.STRONG))

    assert actions.start_run(job, now=timezone.now(), runtime=runner.runtime_for(job))

    assert job.active_hold.runtime == "runsc"
    assert api.get(job_url(job)).json()["hold"]["runtime"] == "runsc"


def test_two_runs_held_at_once_on_a_node_get_different_uids(settings, monkeypatch):
    monkeypatch.setattr(runner.os, "geteuid", lambda: 0)  # a worker running as root
    settings.E31_JOB_UID_BASE, settings.E31_JOB_UID_COUNT = 20000, 64

    uids = [runner.job_uid(cpu_set) for cpu_set in ([0], [1, 2], [3], [63])]

    assert uids == [20000, 20001, 20003, 20063]


def test_isolation_is_part_of_the_idempotency_fingerprint(api, image, local_node):
    first = post_job(api, key="k-1", isolation="strong")
    second = post_job(api, key="k-1")

    assert first.status_code == 201
    assert second.status_code == 422, second.json()
    assert Job.objects.count() == 1
