"""GET /api/v1/pool/nodes/ and POST …/{name}/drain/ and …/resume/."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.lifecycle.actions import schedule_pass
from pool.models import Node, NodeStateChange
from pool.nodes import Capacity, mark_lost_nodes, register, set_features
from tests.factories import submit_job

NOW = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)
NODES = "/api/v1/pool/nodes/"
WHY = {"reason": "maintenance"}  # a drain says why


@pytest.fixture
def node(db) -> Node:
    return register("n1", Capacity(cpu_ids=[0, 1, 2, 3], memory_mb=4096, gpu_ids=["GPU-aaa", "GPU-bbb"]), now=NOW)


def state_of(node: Node) -> str:
    node.refresh_from_db()
    return node.state


def test_nodes_list_shows_free_capacity_net_of_holds(api, member, team, node):
    submit_job(member, team, cpus=3, memory_mb=1024, gpus=1)
    schedule_pass(now=NOW)

    response = api.get(NODES)

    assert response.status_code == 200
    [body] = response.json()
    assert body["name"] == "n1" and body["state"] == "active"
    assert (body["cpus"], body["memory_mb"], body["gpus"]) == (4, 4096, 2)
    assert body["free"] == {"cpus": 1, "cpu_ids": [3], "memory_mb": 3072, "gpus": 1}
    assert body["last_heartbeat"].startswith("2026-03-02T22:00:00")


def test_a_node_shows_its_features(api, node):
    set_features(node, ["bigmem", "nvme"])

    [body] = api.get(NODES).json()

    assert body["features"] == ["bigmem", "nvme"]
    assert api.get(f"{NODES}n1/").json()["features"] == ["bigmem", "nvme"]


def test_nodes_list_queries_do_not_grow_with_nodes(api, django_assert_max_num_queries):
    for i in range(5):
        register(f"n{i}", Capacity(cpu_ids=[0, 1], memory_mb=1024, gpu_ids=[]), now=NOW)

    with django_assert_max_num_queries(6):
        response = api.get(NODES)

    assert [n["name"] for n in response.json()] == [f"n{i}" for i in range(5)]


def test_a_node_is_shown_by_name(api, node):
    response = api.get(f"{NODES}n1/")

    assert response.status_code == 200
    assert response.json()["free"]["cpu_ids"] == [0, 1, 2, 3]


def test_an_unknown_node_is_404(api, operator_api, db):
    assert api.get(f"{NODES}nowhere/").status_code == 404
    assert operator_api.post(f"{NODES}nowhere/drain/").status_code == 404


@pytest.mark.parametrize("name", ["%00", "n%201", "n1%0A", "%C3%A9"])
def test_a_name_that_is_no_slug_is_404_not_a_query(api, operator_api, node, name):
    assert api.get(f"{NODES}{name}/").status_code == 404
    assert operator_api.post(f"{NODES}{name}/drain/").status_code == 404


def test_an_operator_drains_and_resumes_a_node(operator_api, node):
    drained = operator_api.post(f"{NODES}n1/drain/", WHY)

    assert drained.status_code == 200 and drained.json()["state"] == "draining"
    assert state_of(node) == Node.State.DRAINING

    resumed = operator_api.post(f"{NODES}n1/resume/")

    assert resumed.status_code == 200 and resumed.json()["state"] == "active"
    assert state_of(node) == Node.State.ACTIVE


def test_a_drain_says_who_did_it_and_when(operator_api, operator, node):
    before = timezone.now()
    drained = operator_api.post(f"{NODES}n1/drain/", WHY).json()

    assert drained["state_changed_by"] == operator.username
    node.refresh_from_db()
    assert node.state_changed_by == operator and node.state_changed_at >= before
    listed = {n["name"]: n for n in operator_api.get(NODES).json()}
    assert listed["n1"]["state_changed_by"] == operator.username


@pytest.mark.parametrize("action", ["drain", "resume"])
def test_a_member_cannot_drain_or_resume_a_node(api, node, action):
    response = api.post(f"{NODES}n1/{action}/")

    assert response.status_code == 403
    assert state_of(node) == Node.State.ACTIVE


@pytest.mark.parametrize("action", ["drain", "resume"])
def test_an_offline_node_stays_offline_until_its_worker_registers(operator_api, node, action):
    # Offline means its worker stopped heartbeating: holds there would wait for nobody.
    Node.objects.filter(pk=node.pk).update(state=Node.State.OFFLINE)

    response = operator_api.post(f"{NODES}n1/{action}/", WHY)

    assert response.status_code == 409
    assert "detail" in response.json()
    assert state_of(node) == Node.State.OFFLINE
    register("n1", Capacity(cpu_ids=[0, 1, 2, 3], memory_mb=4096, gpu_ids=[]), now=NOW)
    assert state_of(node) == Node.State.ACTIVE


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "n1/drain/"), ("get", "n1/resume/"), ("post", ""), ("delete", "n1/"), ("patch", "n1/")],
)
def test_wrong_method_is_405(operator_api, node, method, path):
    assert getattr(operator_api, method)(f"{NODES}{path}").status_code == 405


@pytest.mark.parametrize(("method", "path"), [("get", ""), ("get", "n1/"), ("post", "n1/drain/")])
def test_anonymous_callers_are_refused(node, method, path):
    response = getattr(APIClient(), method)(f"{NODES}{path}")

    assert response.status_code in (401, 403)
    assert state_of(node) == Node.State.ACTIVE


def test_every_state_change_of_a_node_is_kept_with_who_and_why(operator_api, operator, node):
    operator_api.post(f"{NODES}n1/drain/", WHY)
    operator_api.post(f"{NODES}n1/drain/", WHY)  # already draining: nothing to record
    operator_api.post(f"{NODES}n1/resume/")
    lost = mark_lost_nodes(now=timezone.now() + timedelta(hours=1), after=timedelta(seconds=60))
    register("n1", Capacity(cpu_ids=[0, 1, 2, 3], memory_mb=8192, gpu_ids=[]), now=timezone.now() + timedelta(hours=1))

    assert [n.name for n in lost] == ["n1"]
    history = list(NodeStateChange.objects.filter(node=node).order_by("at", "id"))
    assert [(c.from_state, c.to_state, c.by) for c in history] == [
        ("active", "draining", operator),
        ("draining", "active", operator),
        ("active", "offline", None),
        ("offline", "active", None),
    ]
    assert history[2].reason.startswith("lost: no heartbeat since")
    assert history[3].reason == "its worker registered again"
