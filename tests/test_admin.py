"""The operators' admin: every model is there; jobs, records and holds are read-only; a node's state changes
through drain and resume only; no delete is offered that the database's protection would refuse."""

import re
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.utils import timezone

from accounting.budgets import extend
from accounting.models import Record
from jobs.lifecycle.actions import cancel, schedule_pass
from jobs.models import Job, Outcome, RuntimeImage, Stage
from pool.models import Node, Queue
from pool.nodes import Capacity, register, set_state
from teams.models import Team
from tests.factories import ended_job, submit_job

PAGES = ["teams/team", "teams/membership", "teams/apitoken", "jobs/runtimeimage", "jobs/job", "pool/node",
         "pool/hold", "accounting/record", "axes/accessattempt", "axes/accessfailurelog"]  # fmt: skip


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


# --- jobs: read-only, cancelled through the action ----------------------------------------------------


def test_a_job_is_read_only_in_the_admin(client, operator, member, team, local_node):
    job = submit_job(member, team, name="as submitted", max_retries=1)
    client.force_login(operator)

    page = client.get(f"/admin/jobs/job/{job.pk}/change/")
    assert page.status_code == 200 and b"as submitted" in page.content
    for field in (b"name", b"attempt", b"max_retries", b"stage", b"cpus"):
        assert b'name="' + field + b'"' not in page.content
    assert b'name="_save"' not in page.content
    response = client.post(f"/admin/jobs/job/{job.pk}/change/", {"name": "renamed", "attempt": 3, "max_retries": 5})
    assert response.status_code == 403
    job.refresh_from_db()
    assert (job.name, job.attempt, job.max_retries) == ("as submitted", 1, 1)
    assert client.get("/admin/jobs/job/add/").status_code == 403


def test_a_jobs_reason_names_the_jobs_it_is_about_by_their_names(client, operator, member, team, local_node):
    upstream = ended_job(member, team, outcome=Outcome.FAILED, at=timezone.now(), name="clean data", exit_code=1)
    doomed = submit_job(member, team, name="train", after=[("ok", upstream)])
    schedule_pass(now=timezone.now())
    client.force_login(operator)

    page = client.get(f"/admin/jobs/job/{doomed.pk}/change/").content.decode()

    assert "its dependency can never be met: job “clean data” ended failed (after_ok)" in page
    assert str(upstream.pk) not in page


def test_a_job_cannot_be_deleted_in_the_admin(client, operator, released):
    client.force_login(operator)

    changelist = client.get("/admin/jobs/job/")
    assert b'value="delete_selected"' not in changelist.content
    assert b'value="cancel_jobs"' in changelist.content
    assert client.post(f"/admin/jobs/job/{released.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Job.objects.filter(pk=released.pk).exists()


def test_the_cancel_action_cancels_the_selected_jobs_as_the_operator(client, operator, member, team):
    job = submit_job(member, team)
    client.force_login(operator)

    response = client.post("/admin/jobs/job/", {"action": "cancel_jobs", "_selected_action": [job.pk]})

    assert response.status_code == 302
    job.refresh_from_db()
    assert (job.stage, job.outcome, job.cancelled_by) == (Stage.RELEASE, Outcome.CANCELLED, operator)


# --- nodes: state through drain and resume only -----------------------------------------------------


def test_a_nodes_state_cannot_be_edited_in_the_admin(client, operator):
    node = register("n1", Capacity(cpu_ids=[0], memory_mb=512, gpu_ids=[]), now=timezone.now())
    client.force_login(operator)

    page = client.get(f"/admin/pool/node/{node.pk}/change/")
    assert page.status_code == 200 and b'name="state"' not in page.content  # only its features are editable
    hidden = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.content.decode()))
    response = client.post(
        f"/admin/pool/node/{node.pk}/change/", {**hidden, "name": "n2", "state": "offline", "memory_mb": 1}
    )
    assert response.status_code == 302  # saved: what is not its features was not taken
    assert Node.objects.filter(pk=node.pk, name="n1", state=Node.State.ACTIVE, memory_mb=512).exists()
    assert client.get("/admin/pool/node/add/").status_code == 403


def test_the_resume_action_takes_a_drained_node_back(client, operator):
    node = register("n1", Capacity(cpu_ids=[0], memory_mb=512, gpu_ids=[]), now=timezone.now())
    set_state(node, Node.State.DRAINING, now=timezone.now())
    client.force_login(operator)

    client.post("/admin/pool/node/", {"action": "resume", "_selected_action": [node.pk]})

    node.refresh_from_db()
    assert (node.state, node.state_changed_by) == (Node.State.ACTIVE, operator)


def test_a_node_that_held_jobs_offers_no_delete(client, operator, released, local_node):
    client.force_login(operator)

    assert b'value="delete_selected"' not in client.get("/admin/pool/node/").content
    page = client.get(f"/admin/pool/node/{local_node.pk}/change/")
    assert b"/delete/" not in page.content
    assert client.post(f"/admin/pool/node/{local_node.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Node.objects.filter(pk=local_node.pk).exists()


def test_a_node_that_never_held_anything_can_be_deleted(client, operator):
    node = register("misnamed", Capacity(cpu_ids=[0], memory_mb=512, gpu_ids=[]), now=timezone.now())
    client.force_login(operator)

    response = client.post(f"/admin/pool/node/{node.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302 and not Node.objects.filter(pk=node.pk).exists()


# --- teams and images: no delete that PROTECT would refuse ------------------------------------------------


def test_a_team_or_image_with_jobs_offers_no_delete(client, operator, released, team):
    client.force_login(operator)

    for page, pk in (("teams/team", team.pk), ("jobs/runtimeimage", released.image_id)):
        assert b'value="delete_selected"' not in client.get(f"/admin/{page}/").content
        assert client.post(f"/admin/{page}/{pk}/delete/", {"post": "yes"}).status_code == 403
    assert Team.objects.filter(pk=team.pk).exists() and RuntimeImage.objects.filter(pk=released.image_id).exists()


def test_a_team_without_jobs_can_be_deleted(client, operator, other_team):
    client.force_login(operator)

    assert client.post(f"/admin/teams/team/{other_team.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Team.objects.filter(pk=other_team.pk).exists()


def test_holds_are_read_only_in_the_admin(client, operator, released):
    client.force_login(operator)
    hold = released.holds.get()

    assert b'value="delete_selected"' not in client.get("/admin/pool/hold/").content
    assert client.get("/admin/pool/hold/add/").status_code == 403
    assert client.post(f"/admin/pool/hold/{hold.pk}/delete/", {"post": "yes"}).status_code == 403


# --- API tokens: listed by prefix, revoked by deleting ------------------------------------------------------


def test_an_operator_revokes_a_token_in_the_admin_which_never_shows_a_key(client, operator, member):
    from teams.models import ApiToken
    from teams.people import token_for

    key = token_for(member)
    token = ApiToken.objects.get(user=member)
    client.force_login(operator)

    page = client.get(f"/admin/teams/apitoken/{token.pk}/change/")
    assert page.status_code == 200 and token.prefix.encode() in page.content
    assert key.encode() not in page.content and token.digest.encode() not in page.content
    assert client.get("/admin/teams/apitoken/add/").status_code == 403
    assert client.post(f"/admin/teams/apitoken/{token.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not ApiToken.objects.exists()


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


def test_the_admin_is_titled_as_the_site(client, operator):
    page = client.get("/admin/login/").content.decode()

    assert "<title>Log in | E31 Network</title>" in page and "E31 Network administration" in page
    assert "Django" not in page
    client.force_login(operator)
    index = client.get("/admin/").content.decode()
    assert "<title>The pool, its teams and jobs | E31 Network</title>" in index


# --- what a row is called: its team and node by name, its moments in the operator's zone ------------------------


def test_a_rows_name_says_its_team_and_node_by_their_names(client, operator, team):
    extension = extend(team, amount=Decimal("10.00"), reason="a deadline", by=operator, now=timezone.now())
    node = register("n1", Capacity(cpu_ids=[0], memory_mb=512, gpu_ids=[]), now=timezone.now())
    set_state(node, Node.State.DRAINING, now=timezone.now(), acting_user=operator, reason="fan noise")
    client.force_login(operator)

    page = client.get(f"/admin/accounting/budgetextension/{extension.pk}/change/").content.decode()
    node_page = client.get(f"/admin/pool/node/{node.pk}/change/").content.decode()

    assert "+10.00 for red in " in page
    assert "n1: active → draining at " in node_page


def test_a_rows_name_gives_its_moment_in_the_operators_zone(client, operator):
    operator.teams.update(time_zone="Europe/Paris")
    at = datetime(2026, 12, 6, 19, 8, tzinfo=UTC)
    node = register("n1", Capacity(cpu_ids=[0], memory_mb=512, gpu_ids=[]), now=at)
    set_state(node, Node.State.DRAINING, now=at, acting_user=operator, reason="fan noise")
    client.force_login(operator)

    page = client.get(f"/admin/pool/node/{node.pk}/change/").content.decode()

    assert "active → draining at 2026-12-06 20:08" in page
    assert page.count("Times in Europe/Paris") == 1  # the zone named once, as on the site's pages


def test_a_deletes_confirmation_names_the_links_it_removes(client, operator, team):
    queue = Queue.objects.create(name="urgent", priority=100)
    queue.teams.set([team])
    client.force_login(operator)

    page = client.get(f"/admin/pool/queue/{queue.pk}/delete/").content.decode()

    assert "Queue-team relationship: urgent – red" in page and "object (" not in page
