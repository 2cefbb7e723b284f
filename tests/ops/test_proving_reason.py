"""A proving node whose isolation probes cannot run says why on the operator panel and in the pool API,
and says so no more once they run."""

from html import unescape

import pytest
from django.utils import timezone

from isolation import checks
from jobs.models import RuntimeImage
from pool.models import Node
from pool.nodes import PROBES_FIRST, Capacity, register

MISSING = "its isolation probes need the runtime image python, which is not registered"


@pytest.fixture
def op(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def proving(db) -> Node:
    node = register("n1", Capacity(cpu_ids=[0, 1], memory_mb=2048, gpu_ids=[]), now=timezone.now(), proving=True)
    checks.prove(node, now=timezone.now(), engine_runtimes={"runc"})  # a heartbeat's look at it
    return node


def card(page: str) -> str:
    return page.split('id="node-n1"')[1].split("</article>")[0]


def test_the_panel_says_the_probe_image_is_missing_on_the_nodes_card(op, proving):
    page = op.get("/operator/").content.decode()

    assert f'<p class="node-reason" id="reason-n1">Why: {MISSING}</p>' in card(page)
    assert f"Why: {MISSING}" in card(op.get("/operator/nodes/").content.decode())  # the polled panel too
    assert "DoesNotExist" not in page


def test_the_nodes_api_says_the_probe_image_is_missing(operator_api, proving):
    [body] = operator_api.get("/api/v1/pool/nodes/").json()

    assert (body["name"], body["state"], body["state_reason"]) == ("n1", "proving", MISSING)


def test_once_the_image_is_registered_the_card_says_the_probes_run_first(op, proving):
    RuntimeImage.objects.create(name="python", reference="e31/python:3", description="python")

    [round] = checks.prove(proving, now=timezone.now(), engine_runtimes={"runc"})

    assert round.runtime == "runc"
    page = unescape(op.get("/operator/nodes/").content.decode())
    assert MISSING not in page
    assert f"Why: registered: {PROBES_FIRST}" in card(page)
