"""The operators' admin: every model is there, records and holds are read-only, drain goes through the pool."""

import pytest
from django.utils import timezone

from accounting.models import Record
from jobs.actions import cancel, schedule_pass
from pool.models import Node
from pool.nodes import Capacity, register
from tests.factories import submit_job

PAGES = ["teams/team", "teams/membership", "jobs/runtimeimage", "jobs/job", "pool/node", "pool/hold",
         "accounting/record"]  # fmt: skip


@pytest.fixture
def released(member, team, local_node):
    job = submit_job(member, team)
    schedule_pass(now=timezone.now())
    return cancel(job, now=timezone.now())


@pytest.mark.parametrize("page", PAGES)
def test_operator_sees_every_model_in_the_admin(client, operator, released, page):
    client.force_login(operator)

    assert client.get(f"/admin/{page}/").status_code == 200


def test_a_member_who_is_not_an_operator_is_kept_out_of_the_admin(client, member):
    client.force_login(member)

    assert client.get("/admin/jobs/job/").status_code == 302


def test_records_are_read_only_in_the_admin(client, operator, released):
    client.force_login(operator)
    record = Record.objects.get(job=released)

    page = client.get(f"/admin/accounting/record/{record.pk}/change/")
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert client.post(f"/admin/accounting/record/{record.pk}/change/", {"outcome": "succeeded"}).status_code == 403
    assert client.post(f"/admin/accounting/record/{record.pk}/delete/", {"post": "yes"}).status_code == 403
    record.refresh_from_db()
    assert record.outcome == "cancelled"


def test_the_drain_action_drains_active_nodes_and_leaves_offline_ones_offline(client, operator):
    now = timezone.now()
    active = register("n1", Capacity(cpu_ids=[0], memory_mb=512, gpu_ids=[]), now=now)
    lost = register("n2", Capacity(cpu_ids=[1], memory_mb=512, gpu_ids=[]), now=now)
    Node.objects.filter(pk=lost.pk).update(state=Node.State.OFFLINE)
    client.force_login(operator)

    response = client.post(
        "/admin/pool/node/", {"action": "drain", "_selected_action": [active.pk, lost.pk]}, follow=True
    )

    assert response.status_code == 200
    assert Node.objects.get(pk=active.pk).state == Node.State.DRAINING
    assert Node.objects.get(pk=lost.pk).state == Node.State.OFFLINE
    assert b"is offline" in response.content


def test_where_a_job_stands_in_the_queue_is_read_only_in_the_admin(client, operator, member, team):
    # The scheduler pass writes it: an operator's edit would be overwritten, or shown as if the pass said it.
    register("n1", Capacity(cpu_ids=[0], memory_mb=1024, gpu_ids=[]), now=timezone.now())
    submit_job(member, team, time_limit_s=600)
    waiting = submit_job(member, team)
    schedule_pass(now=timezone.now())
    client.force_login(operator)

    page = client.get(f"/admin/jobs/job/{waiting.pk}/change/").content.decode()

    assert "expected to start by" in page
    for field in ("queue_position", "wait_reason", "expected_start"):
        assert f'name="{field}' not in page
