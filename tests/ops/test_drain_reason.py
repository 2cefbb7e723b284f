"""Draining asks why and says what it does: the confirmation counts the jobs running there; a drain
without a reason is refused with the field's error; the reason shows beside the node on the panel, in its
history and in the API."""

import pytest
from django.utils import timezone

from jobs.lifecycle.actions import schedule_pass
from ops.panel import drain_consequence
from pool.models import Node, NodeStateChange
from pool.nodes import Capacity, register
from tests.factories import submit_job


@pytest.fixture
def op(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def node(db):
    return register("n1", Capacity(cpu_ids=[0, 1, 2, 3], memory_mb=4096, gpu_ids=[]), now=timezone.now())


@pytest.mark.parametrize(
    ("running", "said"),
    [
        (0, "No job runs there now; no new job starts there"),
        (1, "1 job runs there now; it finishes first, no new job starts there"),
        (2, "2 jobs run there now; they finish first, no new job starts there"),
    ],
)
def test_the_drain_confirmation_says_how_many_jobs_run_there(op, member, team, node, image, running, said):
    for n in range(running):
        submit_job(member, team, image=image, name=f"running {n}", cpus=1)
    schedule_pass(now=timezone.now())
    register("n2", Capacity(cpu_ids=[0], memory_mb=1024, gpu_ids=[]), now=timezone.now())  # not counted

    page = op.get("/operator/nodes/n1/drain/").content.decode()

    assert drain_consequence(running) == said
    assert f'<strong id="running-now">{said}</strong>' in page
    assert '<label for="id_reason">Why drain it?</label>' in page
    assert 'name="reason"' in page and "required" in page


def test_a_drain_without_a_reason_is_refused_with_the_fields_error(op, node):
    response = op.post("/operator/nodes/n1/drain/", {"reason": "   "})

    page = response.content.decode()
    assert response.status_code == 400
    assert Node.objects.get(name="n1").state == Node.State.ACTIVE
    assert not NodeStateChange.objects.exists()
    assert '<div class="error" id="id_reason_error"><p>Say why it is drained' in page
    assert 'aria-describedby="id_reason_helptext id_reason_error"' in page and 'aria-invalid="true"' in page
    assert "<title>Error: Drain n1?" in page


def test_the_reason_shows_beside_the_node_on_the_panel_and_in_its_history(op, operator, node):
    response = op.post("/operator/nodes/n1/drain/", {"reason": "  kernel upgrade, back by 14:00  "}, follow=True)

    assert response.redirect_chain == [("/operator/", 302)]
    change = NodeStateChange.objects.get(node=node)
    assert (change.to_state, change.by, change.reason) == ("draining", operator, "kernel upgrade, back by 14:00")
    card = response.content.decode().split('id="node-n1"')[1].split("</article>")[0]
    assert '<p class="node-reason" id="reason-n1">Why: kernel upgrade, back by 14:00</p>' in card
    assert "Why: kernel upgrade" in op.get("/operator/nodes/").content.decode()  # the polled panel too
    assert "kernel upgrade, back by 14:00" in op.get("/operator/nodes/n1/").content.decode()  # its history


def test_a_resume_needs_no_reason_and_clears_the_one_shown(op, node):
    op.post("/operator/nodes/n1/drain/", {"reason": "kernel upgrade"})

    response = op.post("/operator/nodes/n1/resume/", follow=True)

    assert Node.objects.get(name="n1").state == Node.State.ACTIVE
    assert "Why: kernel upgrade" not in response.content.decode()
    assert NodeStateChange.objects.filter(to_state="active").get().reason == "resumed by an operator"


def test_a_reason_longer_than_the_history_keeps_is_refused(op, node):
    response = op.post("/operator/nodes/n1/drain/", {"reason": "x" * 301})

    assert response.status_code == 400 and "at most 300 characters" in response.content.decode()
    assert Node.objects.get(name="n1").state == Node.State.ACTIVE


def test_the_api_asks_for_a_reason_and_shows_it(operator_api, node):
    refused = operator_api.post("/api/v1/pool/nodes/n1/drain/", {}, format="json")

    assert refused.status_code == 400 and refused.json() == {"reason": ["This field is required."]}
    assert Node.objects.get(name="n1").state == Node.State.ACTIVE

    drained = operator_api.post("/api/v1/pool/nodes/n1/drain/", {"reason": "new fans"}, format="json")

    assert drained.status_code == 200 and drained.json()["state_reason"] == "new fans"
    assert NodeStateChange.objects.get(node=node).reason == "new fans"
    assert operator_api.get("/api/v1/pool/nodes/n1/").json()["state_reason"] == "new fans"


def test_a_reason_is_shown_as_text_never_as_markup(op, node):
    op.post("/operator/nodes/n1/drain/", {"reason": '<img src=x onerror="alert(1)">'})

    for path in ("/operator/", "/operator/nodes/", "/operator/nodes/n1/"):
        page = op.get(path).content.decode()
        assert "<img src=x" not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
