"""Maintenance windows as people meet them: operators schedule them in the admin, which records who; teams
see the ones coming on the submit form, the review page and the API; a change tells the waiting jobs."""

from datetime import datetime, timedelta

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.utils import timezone

from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job
from pool.models import MaintenanceWindow, Node
from pool.nodes import Capacity, register
from tests.conftest import api_client_for
from tests.factories import submit_job


def add_node(name: str) -> Node:
    return register(name, Capacity(cpu_ids=[0, 1], memory_mb=4096, gpu_ids=[]), now=timezone.now())


def window(start: datetime, end: datetime, *nodes: Node, reason: str = "kernel upgrade") -> MaintenanceWindow:
    made = MaintenanceWindow.objects.create(starts_at=start, ends_at=end, reason=reason, created_at=timezone.now())
    made.nodes.set(nodes)
    return made


def form(start: datetime, end: datetime, reason: str, nodes: list[Node]) -> dict:
    start, end = timezone.localtime(start), timezone.localtime(end)
    return {
        "starts_at_0": start.strftime("%Y-%m-%d"), "starts_at_1": start.strftime("%H:%M:%S"),
        "ends_at_0": end.strftime("%Y-%m-%d"), "ends_at_1": end.strftime("%H:%M:%S"),
        "reason": reason, "nodes": [n.pk for n in nodes],
    }  # fmt: skip


# The admin


def test_an_operator_schedules_a_window_which_names_them(client, operator):
    node = add_node("n1")
    start = timezone.now().replace(microsecond=0) + timedelta(days=2)
    client.force_login(operator)
    typed = form(start, start + timedelta(hours=4), "new disks", [node])

    response = client.post("/admin/pool/maintenancewindow/add/", typed)

    assert response.status_code == 302, response.content
    made = MaintenanceWindow.objects.get(reason="new disks")
    assert (made.starts_at, made.created_by, list(made.nodes.all())) == (start, operator, [node])
    entry = LogEntry.objects.get(object_id=str(made.pk), content_type__model="maintenancewindow")
    assert (entry.user, entry.action_flag) == (operator, ADDITION)
    listed = client.get("/admin/pool/maintenancewindow/").content.decode()
    assert "new disks" in listed and "olga" in listed


def test_a_change_to_a_window_is_in_the_admin_log(client, operator):
    start = timezone.now().replace(microsecond=0) + timedelta(days=2)
    made = window(start, start + timedelta(hours=1))
    client.force_login(operator)

    response = client.post(
        f"/admin/pool/maintenancewindow/{made.pk}/change/", form(start, start + timedelta(hours=3), "longer", [])
    )

    assert response.status_code == 302, response.content
    entry = LogEntry.objects.get(object_id=str(made.pk), content_type__model="maintenancewindow")
    assert (entry.user, entry.action_flag) == (operator, CHANGE)
    assert "Ends at" in entry.get_change_message()


@pytest.mark.parametrize(
    "start, length, error",
    [(timedelta(days=1), timedelta(hours=-1), "A window ends after it starts."),
     (timedelta(days=1), timedelta(0), "A window ends after it starts."),
     (timedelta(days=-1), timedelta(hours=2), "A new window cannot start in the past.")],
)  # fmt: skip
def test_a_window_that_ends_before_it_starts_or_starts_in_the_past_is_refused(client, operator, start, length, error):
    starts_at = timezone.now() + start
    client.force_login(operator)

    response = client.post("/admin/pool/maintenancewindow/add/", form(starts_at, starts_at + length, "x", []))

    assert response.status_code == 200
    assert error in response.content.decode()
    assert not MaintenanceWindow.objects.exists()


def test_a_window_under_way_cannot_be_deleted_and_one_over_cannot_be_changed(client, operator):
    now = timezone.now()
    under_way = window(now - timedelta(hours=1), now + timedelta(hours=1))
    MaintenanceWindow.objects.filter(pk=under_way.pk).update(drained_at=now - timedelta(hours=1))
    over = window(now - timedelta(hours=3), now - timedelta(hours=2))
    MaintenanceWindow.objects.filter(pk=over.pk).update(resumed_at=now - timedelta(hours=2))
    client.force_login(operator)

    assert client.post(f"/admin/pool/maintenancewindow/{under_way.pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.post(f"/admin/pool/maintenancewindow/{over.pk}/change/", form(now, now, "x", [])).status_code == 403
    assert MaintenanceWindow.objects.count() == 2


def test_a_new_window_asks_for_a_pass_which_tells_the_waiting_jobs(
    client, operator, django_capture_on_commit_callbacks, monkeypatch
):
    nudged = []
    monkeypatch.setattr("jobs.scheduling.dispatch.nudge", nudged.append)
    start = timezone.now() + timedelta(hours=1)
    client.force_login(operator)

    with django_capture_on_commit_callbacks(execute=True):
        client.post("/admin/pool/maintenancewindow/add/", form(start, start + timedelta(hours=1), "x", []))

    assert set(nudged) == {"jobs.schedule"}


# What teams see


def test_the_api_lists_the_windows_not_over_for_any_member(member):
    now = timezone.now()
    node = add_node("n1")
    window(now - timedelta(days=2), now - timedelta(days=1), reason="over")
    under_way = window(now - timedelta(hours=1), now + timedelta(hours=1), node, reason="new disks")
    later = window(now + timedelta(days=30), now + timedelta(days=31), reason="move to the new room")

    response = api_client_for(member).get("/api/v1/pool/windows/")

    assert response.status_code == 200
    assert [(w["id"], w["reason"], w["nodes"], w["under_way"]) for w in response.json()] == [
        (under_way.pk, "new disks", ["n1"], True), (later.pk, "move to the new room", [], False),
    ]  # fmt: skip


def test_the_api_list_is_read_only_for_members(member):
    response = api_client_for(member).post("/api/v1/pool/windows/", {"reason": "mine"}, format="json")

    assert response.status_code == 405


@pytest.mark.parametrize("page", ["/jobs/new/", "/"])
def test_the_submit_form_and_the_review_show_the_windows_coming(client, member, page):
    now = timezone.now()
    window(now + timedelta(days=1), now + timedelta(days=1, hours=2), add_node("n1"), reason="new disks")
    window(now + timedelta(days=30), now + timedelta(days=31), reason="far off")
    client.force_login(member)

    shown = client.get(page).content.decode()

    assert 'id="maintenance-windows"' in shown and "new disks" in shown and "on n1" in shown
    assert "far off" not in shown


@pytest.mark.parametrize("page", ["/jobs/new/", "/"])
def test_with_no_window_coming_the_pages_say_nothing_of_them(client, member, page):
    client.force_login(member)

    assert 'id="maintenance-windows"' not in client.get(page).content.decode()


def test_a_waiting_jobs_words_name_the_window_and_when_it_starts(member, team, local_node):
    start = timezone.now().replace(second=0, microsecond=0) + timedelta(minutes=10)
    window(start, start + timedelta(hours=1), reason="new disks")
    job = submit_job(member, team, time_limit_s=3600)

    schedule_pass()

    job = Job.objects.get(pk=job.pk)
    assert "maintenance window from" in job.wait_reason and "new disks" in job.wait_reason
    assert timezone.localtime(start).strftime("%H:%M") in job.wait_reason
