"""Who acted is who wrote the code: a schedule runs as its creator while what it runs (its job, its template, the
template's files) is what the creator saw; once another member of its team changes any of it, it runs as the
last member who did, each change an event of the schedule, and its runs' jobs, events and records name them."""

import threading
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, transaction
from django.utils import timezone

from jobs.lifecycle.actions import hold
from jobs.models import Job, JobEvent, RuntimeImage
from jobtemplates.files import attach, delete_template, named, remove
from jobtemplates.models import JobTemplate, TemplateFile
from pool.placement.types import Placement
from schedules.models import Schedule, ScheduleEvent, ScheduleRun
from schedules.runs import due_pass
from teams.models import Membership
from tests.conftest import api_client_for
from tests.factories import RuntimeImageFactory, run_to_release, schedule_of
from tests.workers import wait_until

URL = "/api/v1/schedules/"
JOB = {"name": "nightly", "image": "busybox", "command": ["sh", "/data/run.sh"], "cpus": 1, "memory_mb": 64,
       "time_limit_s": 60}  # fmt: skip


@pytest.fixture(autouse=True)
def _image(db):
    RuntimeImageFactory(name="busybox")


@pytest.fixture
def template(team, member):
    """A template of the team running /data/run.sh, saved by alice with that file."""
    made = JobTemplate.objects.create(
        team=team, name="report", image=RuntimeImage.objects.get(name="busybox"), command="sh /data/run.sh",
        created_by=member,
    )  # fmt: skip
    attach(made, named([SimpleUploadedFile("run.sh", b"echo alice\n")]), by=member, now=timezone.now())
    return made


def replace_file(client, user, template, content: bytes):
    client.force_login(user)
    return client.post(f"/templates/{template.pk}/files/", {"attach-data": [SimpleUploadedFile("run.sh", content)]})


def run_once(schedule: Schedule) -> Job:
    """The schedule's next planned time, recorded by a due pass: its job."""
    assert schedule.next_run_at is not None
    due_pass(now=schedule.next_run_at + timedelta(seconds=1))
    run = ScheduleRun.objects.select_related("job").get(schedule=schedule, planned_at=schedule.next_run_at)
    assert run.status == "submitted", run.reason
    assert run.job is not None
    return run.job


def last_event(schedule: Schedule) -> ScheduleEvent:
    found = ScheduleEvent.objects.filter(schedule=schedule).order_by("-at", "-pk").first()
    assert found is not None
    return found


def test_a_teammate_replacing_a_template_file_becomes_the_runner_and_its_runs_name_them(
    client, member, teammate, team, template, local_node
):
    schedule = schedule_of(member, team, template=template)
    assert run_once(schedule).submitted_by == member

    assert replace_file(client, teammate, template, b"echo bob\n").status_code == 302

    schedule.refresh_from_db()
    assert (schedule.runner, schedule.created_by) == (teammate, member)
    event = last_event(schedule)
    assert (event.action, event.actor) == ("changed", teammate)
    assert event.changes["runner"] == ["alice", "bob"]
    before, after = event.changes["template file run.sh"]
    assert before.startswith("sha256 ") and after.startswith("sha256 ") and before != after
    job = run_once(schedule)
    assert job.submitted_by == teammate
    assert JobEvent.objects.get(job=job, event="submit").actor == "bob"
    hold([Placement(job.pk, job.attempt, local_node, [0], [], job.memory_mb)], now=timezone.now())
    run_to_release(Job.objects.get(pk=job.pk), now=timezone.now())
    [record] = api_client_for(member).get("/api/v1/accounting/records/", {"job": str(job.pk)}).json()["results"]
    assert (record["job"], record["user"]) == (str(job.pk), "bob")


def test_the_runner_is_shown_read_only_in_the_api_and_on_the_page(client, api, member, teammate, team, template):
    schedule = schedule_of(member, team, template=template)
    replace_file(client, teammate, template, b"echo bob\n")

    shown = api.get(f"{URL}{schedule.pk}/").json()
    ignored = api.patch(f"{URL}{schedule.pk}/", {"runner": "alice"}, format="json")
    client.force_login(member)
    page = client.get("/schedules/").content.decode()

    assert (shown["created_by"], shown["runner"]) == ("alice", "bob")
    assert ignored.status_code == 200 and ignored.json()["runner"] == "bob"
    assert "as <span" in page and ">bob</span>" in page and "made by alice" in page
    assert "template file run.sh: sha256 " in page and "runner: alice → bob" in page


def test_a_teammate_who_changes_the_job_becomes_the_runner_and_the_creator_stays(api, member, teammate):
    made = api.post(URL, {"name": "n", "cron": "@daily", "job": JOB | {"command": ["true"]}}, format="json").json()
    other = api_client_for(teammate)

    renamed = other.patch(f"{URL}{made['id']}/", {"name": "renamed"}, format="json").json()
    changed = other.patch(f"{URL}{made['id']}/", {"job": JOB | {"command": ["false"]}}, format="json").json()

    assert (renamed["created_by"], renamed["runner"]) == ("alice", "alice")  # a name is not what it runs
    assert (changed["created_by"], changed["runner"]) == ("alice", "bob")
    event = last_event(Schedule.objects.get())
    assert event.actor == teammate and event.changes["runner"] == ["alice", "bob"]


def test_the_last_member_who_changed_it_is_the_runner_again(client, api, member, teammate, team, template):
    schedule = schedule_of(member, team, template=template)
    replace_file(client, teammate, template, b"echo bob\n")

    replace_file(client, member, template, b"echo alice again\n")

    assert Schedule.objects.get().runner == member
    assert last_event(schedule).changes["runner"] == ["bob", "alice"]


def test_a_change_by_the_runner_is_an_event_and_keeps_the_runner(client, member, team, template):
    schedule = schedule_of(member, team, template=template)

    client.force_login(member)
    assert client.post(f"/templates/{template.pk}/files/run.sh/remove/").status_code == 302

    schedule.refresh_from_db()
    assert schedule.runner is None and schedule.runs_as == member
    event = last_event(schedule)
    assert event.actor == member and "runner" not in event.changes
    assert event.changes["template file run.sh"][1] is None


def test_a_change_reaches_every_schedule_of_the_template(client, member, teammate, team, template):
    first = schedule_of(member, team, template=template, name="first")
    second = schedule_of(member, team, template=template, name="second")
    other = schedule_of(member, team, name="job")

    replace_file(client, teammate, template, b"echo bob\n")

    assert [s.runs_as for s in Schedule.objects.order_by("name")] == [teammate, member, teammate]  # first, job, second
    assert ScheduleEvent.objects.filter(schedule__in=[first, second], action="changed").count() == 2
    assert not ScheduleEvent.objects.filter(schedule=other, action="changed").exists()


def test_an_operator_outside_the_team_changing_the_template_in_the_admin_is_an_event_only(
    client, member, operator, team, template
):
    schedule = schedule_of(member, team, template=template)
    client.force_login(operator)
    form = {
        "name": "report", "description": "", "team": team.pk, "image": template.image_id,
        "command": "sh -x /data/run.sh", "defaults": "{}", "env": "{}", "output_patterns": "[]",
        "cpus": 1, "memory_mb": 256, "gpus": 0, "time_limit_s": 600,
        "max_retries": 0, "retry_on": "[]", "retry_memory_factor": 1.0, "retry_delay_s": 0,
        "files-TOTAL_FORMS": 1, "files-INITIAL_FORMS": 1, "files-0-id": template.files.get().pk,
        "files-0-template": template.pk,
    }  # fmt: skip

    response = client.post(f"/admin/jobtemplates/jobtemplate/{template.pk}/change/", form)

    assert response.status_code == 302, response.content.decode()[:2000]
    event = last_event(schedule)
    assert event.actor == operator
    assert event.changes == {"template command": ["sh /data/run.sh", "sh -x /data/run.sh"]}
    assert Schedule.objects.get().runs_as == member


def test_an_operator_who_is_a_member_becomes_the_runner(client, member, operator, team, template):
    Membership.objects.create(user=operator, team=team)
    schedule = schedule_of(member, team, template=template)

    replace_file(client, operator, template, b"echo olga\n")

    assert Schedule.objects.get(pk=schedule.pk).runner == operator


def test_a_deleted_template_is_an_event_of_its_schedules(member, teammate, team, template):
    schedule = schedule_of(member, team, template=template)

    delete_template(template, by=teammate, now=timezone.now())

    schedule.refresh_from_db()
    assert schedule.template is None and schedule.runs_as == teammate  # who gives it a template next runs it
    event = last_event(schedule)
    assert (event.actor, event.changes) == (
        teammate,
        {"template deleted": ["report", None], "runner": ["alice", "bob"]},
    )


@pytest.mark.django_db(transaction=True)
def test_a_file_removal_takes_the_schedules_lock_before_the_files_as_a_due_pass(member, teammate, team, template):
    schedule = schedule_of(member, team, template=template)
    in_pass, end_pass, removed = threading.Event(), threading.Event(), []

    def a_pass_holding_the_schedule():
        with transaction.atomic():
            Schedule.objects.select_for_update().get(pk=schedule.pk)
            in_pass.set()
            end_pass.wait(60)

    def removal():
        in_pass.wait(60)
        removed.append(remove(template, "run.sh", by=teammate, now=timezone.now()))

    threads = [in_thread(a_pass_holding_the_schedule), in_thread(removal)]
    try:
        wait_until(waiting_on_a_lock, message="the removal waiting for the schedule")
        with transaction.atomic():  # the file's row is free meanwhile: a pass's submission may read and lock it
            TemplateFile.objects.select_for_update(nowait=True).get(template=template, name="run.sh")
    finally:
        end_pass.set()
        for thread in threads:
            thread.join(60)

    assert removed == [True] and not TemplateFile.objects.filter(template=template).exists()
    assert last_event(schedule).changes["template file run.sh"][1] is None


def test_a_file_removed_meanwhile_by_another_request_is_false_and_its_events_undone(member, teammate, team, template):
    from jobtemplates.signals import template_changed

    schedule = schedule_of(member, team, template=template)
    events = ScheduleEvent.objects.filter(schedule=schedule).count()

    def another_request_removed_it(sender, **kwargs):  # after schedules' receiver wrote the events
        TemplateFile.objects.filter(template=template).delete()

    template_changed.connect(another_request_removed_it, dispatch_uid="test.removed_meanwhile")
    try:
        removed = remove(template, "run.sh", by=teammate, now=timezone.now())
    finally:
        template_changed.disconnect(dispatch_uid="test.removed_meanwhile")

    assert removed is False
    assert ScheduleEvent.objects.filter(schedule=schedule).count() == events
    assert Schedule.objects.get().runner is None


def in_thread(work) -> threading.Thread:
    def run():
        try:
            work()
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def waiting_on_a_lock() -> bool:
    """Whether a backend of this test's database waits on a lock."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0
