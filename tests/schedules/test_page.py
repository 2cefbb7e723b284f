"""/schedules/: each schedule of the person's teams with its runs, next times, forecast and audit; pause, resume."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Outcome, RuntimeImage, Stage
from jobtemplates.models import JobTemplate
from schedules.changes import change_schedule, create_schedule
from schedules.models import RunStatus, Schedule, ScheduleEvent, ScheduleRun
from tests.factories import JobArrayFactory, RuntimeImageFactory, array_tasks, ended_job, schedule_of


@pytest.fixture(autouse=True)
def _image(db):
    RuntimeImageFactory(name="busybox")


def test_the_page_shows_each_schedule_with_runs_next_times_forecast_and_audit(client, member, teammate, team,
                                                                              local_node):  # fmt: skip
    job_fields = {"name": "r", "image": "busybox", "command": ["true"], "cpus": 1, "memory_mb": 64, "time_limit_s": 60}
    schedule = create_schedule(team=team, name="nightly report", cron="@nightly", time_zone="Europe/Berlin",
                               template=None, job=job_fields, by=member, now=timezone.now())  # fmt: skip
    change_schedule(schedule, changes={"cron": "30 2 * * *"}, by=teammate, now=timezone.now())
    job = ended_job(member, team, outcome=Outcome.FAILED, at=timezone.now())
    ScheduleRun.objects.create(schedule=schedule, planned_at=timezone.now() - timedelta(days=1),
                               status=RunStatus.SUBMITTED, job=job, recorded_at=timezone.now())  # fmt: skip
    ScheduleRun.objects.create(schedule=schedule, planned_at=timezone.now(), status=RunStatus.REFUSED,
                               reason="Over budget: team red", recorded_at=timezone.now())  # fmt: skip
    client.force_login(member)

    page = client.get("/schedules/").content.decode()

    assert "nightly report" in page and "At 02:30 every day" in page and "Europe/Berlin" in page
    assert f"/jobs/{job.pk}/" in page and "failed" in page
    assert "refused" in page and "Over budget: team red" in page
    assert "Forecast this month" in page and "the team has no budget" in page
    assert "changed by bob" in page and "created by alice" in page
    assert 'href="/schedules/"' in page  # in the nav


def test_an_array_run_shows_the_arrays_outcome_on_the_page_and_in_the_api(client, api, member, team):
    schedule = schedule_of(member, team)
    array = JobArrayFactory(team=team, submitted_by=member, name="sweep", released_at=timezone.now())
    states = [(Stage.RELEASE, Outcome.SUCCEEDED), (Stage.RELEASE, Outcome.CANCELLED)]
    array_tasks(array, RuntimeImage.objects.get(name="busybox"), states)
    ScheduleRun.objects.create(schedule=schedule, planned_at=timezone.now(), status=RunStatus.SUBMITTED, array=array,
                               recorded_at=timezone.now())  # fmt: skip
    client.force_login(member)

    page = client.get("/schedules/").content.decode()
    [run] = api.get(f"/api/v1/schedules/{schedule.pk}/runs/").json()["results"]

    assert f"/arrays/{array.pk}/" in page and 'class="outcome outcome-cancelled"' in page
    assert run["outcome"] == "cancelled" and run["array"] == str(array.pk)


def test_the_list_reads_a_fixed_number_of_queries(client, member, team, django_assert_max_num_queries):
    for number in range(10):
        made = schedule_of(member, team, name=f"s{number}")
        ScheduleRun.objects.create(schedule=made, planned_at=timezone.now(), status=RunStatus.MISSED,
                                   recorded_at=timezone.now())  # fmt: skip
    client.force_login(member)

    with django_assert_max_num_queries(25):
        answer = client.get("/schedules/")

    assert answer.status_code == 200
    assert answer.content.decode().count('class="card schedule"') == 10


def test_an_outsider_sees_none_of_the_teams_schedules_and_cannot_pause_them(client, member, outsider, team):
    schedule = schedule_of(member, team, name="secret nightly")
    client.force_login(outsider)

    assert "secret nightly" not in client.get("/schedules/").content.decode()
    assert client.post(f"/schedules/{schedule.pk}/pause/").status_code == 404
    schedule.refresh_from_db()
    assert not schedule.paused


def test_pause_and_resume_swap_the_row_for_htmx(client, member, team):
    schedule = schedule_of(member, team, name="nightly")
    client.force_login(member)

    paused = client.post(f"/schedules/{schedule.pk}/pause/", HTTP_HX_REQUEST="true")

    assert paused.status_code == 200
    assert f'id="schedule-{schedule.pk}"' in paused.content.decode() and "Resume" in paused.content.decode()
    schedule.refresh_from_db()
    assert schedule.paused
    resumed = client.post(f"/schedules/{schedule.pk}/resume/")
    assert resumed.status_code == 302
    schedule.refresh_from_db()
    assert not schedule.paused


def test_pause_takes_only_post_and_the_page_a_signed_in_person(client, member, team):
    schedule = schedule_of(member, team)

    assert client.get("/schedules/").status_code == 302  # to the login page
    client.force_login(member)
    assert client.get(f"/schedules/{schedule.pk}/pause/").status_code == 405


def template_of(team, **fields):
    values = {"name": "report", "image": RuntimeImage.objects.get(), "command": "echo {who}", "defaults": {"who": "x"}}
    return JobTemplate.objects.create(team=team, **(values | fields))


def test_the_small_form_makes_a_schedule_of_a_template(client, member, team):
    template = template_of(team)
    client.force_login(member)

    answer = client.post("/schedules/", {"name": "daily report", "cron": "@daily", "template": template.pk})

    schedule = Schedule.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/schedules/#schedule-{schedule.pk}"
    assert (schedule.name, schedule.template, schedule.created_by, schedule.time_zone) == (
        "daily report", template, member, team.time_zone,
    )  # fmt: skip
    assert ScheduleEvent.objects.get().action == "created"


def test_the_small_form_says_what_the_api_refuses_at_its_field(client, member, team):
    template = template_of(team, defaults={})  # a parameter without a default: a run could not fill it in
    client.force_login(member)

    bad_cron = client.post("/schedules/", {"name": "r", "cron": "0 1 * *", "template": template_of(team).pk})
    no_default = client.post("/schedules/", {"name": "r", "cron": "@daily", "template": template.pk})

    assert bad_cron.status_code == 400 and "five fields" in bad_cron.content.decode()
    assert no_default.status_code == 400 and 'class="error"' in no_default.content.decode()
    assert not Schedule.objects.exists()
