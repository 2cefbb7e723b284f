"""Operators label a node with its features in the admin: only the features are editable, each change is
logged with who made it and what they were before, and the node's page there shows that log."""

import re

from django.contrib.admin.models import LogEntry
from django.utils import timezone

from pool.models import Node
from pool.nodes import Capacity, register, set_state

HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')


def node(features: list[str] | None = None) -> Node:
    return register("n1", Capacity(cpu_ids=[0], memory_mb=512, gpu_ids=[]), now=timezone.now(), features=features)


def edit(client, n: Node, features: str):
    """Save the node's admin page as a browser does: its hidden fields (its history's formset) and the features."""
    page = client.get(f"/admin/pool/node/{n.pk}/change/").content.decode()
    return client.post(f"/admin/pool/node/{n.pk}/change/", {**dict(HIDDEN.findall(page)), "features": features})


def test_an_operator_sets_a_nodes_features_and_the_change_is_logged_with_who(client, operator):
    n1 = node(["bigmem"])
    client.force_login(operator)

    response = edit(client, n1, "nvme, BigMem")

    assert response.status_code == 302
    assert Node.objects.get(pk=n1.pk).features == ["bigmem", "nvme"]
    entry = LogEntry.objects.get(object_id=str(n1.pk))
    assert (entry.user, entry.get_change_message()) == (operator, "Changed features: bigmem → bigmem, nvme.")


def test_the_nodes_admin_page_shows_who_changed_its_features(client, operator):
    n1 = node()
    set_state(n1, Node.State.DRAINING, now=timezone.now())  # a history of states on the page too
    client.force_login(operator)
    edit(client, n1, "gpu-h100")

    page = client.get(f"/admin/pool/node/{n1.pk}/change/").content.decode()

    assert f"by {operator.username}: Changed features: none → gpu-h100." in page
    assert 'value="gpu-h100"' in page


def test_a_feature_a_constraint_could_not_name_is_refused_and_nothing_is_logged(client, operator):
    n1 = node(["bigmem"])
    client.force_login(operator)

    response = edit(client, n1, "big mem")

    assert response.status_code == 200 and "&#x27;big mem&#x27; is not a feature" in response.content.decode()
    assert Node.objects.get(pk=n1.pk).features == ["bigmem"]
    assert not LogEntry.objects.exists()


def test_saving_a_node_unchanged_logs_no_change(client, operator):
    n1 = node(["bigmem", "nvme"])
    client.force_login(operator)

    edit(client, n1, "bigmem, nvme")

    page = client.get(f"/admin/pool/node/{n1.pk}/change/").content.decode()
    assert "none made in the admin" in page


def test_the_node_list_shows_each_nodes_features(client, operator):
    node(["bigmem", "nvme"])
    client.force_login(operator)

    assert "bigmem, nvme" in client.get("/admin/pool/node/").content.decode()
