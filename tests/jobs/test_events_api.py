"""GET /api/v1/jobs/<id>/events/: a job's history, oldest first, for its team only."""

from datetime import timedelta

import jsonschema
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.lifecycle import actions
from jobs.lifecycle.history import REAPER
from jobs.models import Outcome, Stage
from tests.conftest import api_client_for
from tests.factories import submit_job
from tests.jobs.conftest import T0, collecting, held, released, running

FIELDS = {"at", "stage", "outcome", "attempt", "actor", "reason"}


def events_url(job) -> str:
    return f"/api/v1/jobs/{job.pk}/events/"


@pytest.fixture
def retried(member, team, image, local_node):
    """A job whose first attempt's node was lost, run to the end by its second."""
    job = submit_job(member, team, image=image, max_retries=1)
    running(held(job))
    actions.release_lost(job, node_name=local_node.name, last_heartbeat=T0, now=T0 + timedelta(seconds=2), actor=REAPER)
    job.refresh_from_db()
    return released(collecting(running(held(job, now=T0 + timedelta(seconds=3)), now=T0 + timedelta(seconds=4))))


def test_the_history_comes_oldest_first_with_its_six_fields(api, retried, local_node):
    response = api.get(events_url(retried))

    assert response.status_code == 200
    events = response.json()
    assert all(set(event) == FIELDS for event in events)
    assert [(e["stage"], e["attempt"], e["actor"]) for e in events] == [
        (Stage.SUBMIT, 1, "alice"),
        (Stage.RENT, 1, "scheduler"),
        (Stage.RUN, 1, f"node {local_node.name}"),
        (Stage.SUBMIT, 1, "reaper"),
        (Stage.RENT, 2, "scheduler"),
        (Stage.RUN, 2, f"node {local_node.name}"),
        (Stage.OUTPUT, 2, f"node {local_node.name}"),
        (Stage.RELEASE, 2, f"node {local_node.name}"),
    ]
    assert events[3]["outcome"] == Outcome.NODE_LOST and "was lost" in events[3]["reason"]
    assert events[-1]["outcome"] == Outcome.SUCCEEDED
    assert [e["at"] for e in events[1:]] == sorted(e["at"] for e in events[1:])


def test_a_teammate_sees_who_cancelled(teammate, job_at, member):
    job = job_at(Stage.SUBMIT)
    actions.cancel(job, now=T0, acting_user=member)

    events = api_client_for(teammate).get(events_url(job)).json()

    assert (events[-1]["stage"], events[-1]["outcome"], events[-1]["actor"]) == ("release", "cancelled", "alice")


def test_an_outsider_gets_404(outsider_api, job_at):
    job = job_at(Stage.RELEASE)

    response = outsider_api.get(events_url(job))

    assert response.status_code == 404
    assert "stage" not in response.content.decode()


def test_an_unknown_job_is_404(api, db):
    assert api.get("/api/v1/jobs/00000000-0000-0000-0000-000000000000/events/").status_code == 404


def test_signed_out_is_refused(client, job_at):
    assert client.get(events_url(job_at(Stage.SUBMIT))).status_code in (401, 403)


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_a_wrong_method_is_405(api, job_at, method):
    job = job_at(Stage.SUBMIT)

    assert getattr(api, method)(events_url(job)).status_code == 405
    assert len(api.get(events_url(job)).json()) == 1  # nothing was added


def test_the_query_count_does_not_grow_with_the_history(api, member, team, image, local_node, retried):
    short = submit_job(member, team, image=image)
    counts = []
    for job in (short, retried):
        with CaptureQueriesContext(connection) as queries:
            assert api.get(events_url(job)).status_code == 200
        counts.append(len(queries))

    assert counts[0] == counts[1] <= 4  # the token, the job as its team sees it, its events (and a savepoint)


def test_every_event_of_a_history_is_one_the_api_document_allows(api, retried):
    """A client generated from /api/schema/ reads each event: the blank outcome of the events before the end too."""
    document = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    events = api.get(events_url(retried)).json()
    validator = jsonschema.Draft7Validator({"$ref": "#/components/schemas/JobEvent", **document})

    assert {event["outcome"] for event in events} == {"", Outcome.NODE_LOST, Outcome.SUCCEEDED}
    for event in events:
        assert not list(validator.iter_errors(event)), event
