"""POST /schedules/: a schedule made in the browser of a job's fields (the submit form's), or of a template."""

import pytest

from jobs.models import RuntimeImage
from jobtemplates.models import JobTemplate
from schedules.models import Schedule, ScheduleEvent
from tests.factories import RuntimeImageFactory, schedule_of

JOB = {
    "name": "nightly report",
    "cron": "30 2 * * *",
    "time_zone": "Europe/Berlin",
    "runs": "job",
    "job-name": "report",
    "job-image": "busybox",
    "job-command": "python3 /report.py --all",
    "job-cpus": "2",
    "job-memory_mb": "512",
    "job-time_limit_s": "1h",
}


@pytest.fixture(autouse=True)
def _image(db):
    RuntimeImageFactory(name="busybox")


def test_the_page_offers_the_submit_forms_fields_and_the_cron_line(client, member):
    client.force_login(member)

    page = client.get("/schedules/").content.decode()

    assert "A new schedule" in page and "The job each run submits" in page
    for name in ("job-image", "job-command", "job-cpus", "job-indices", "cron", "time_zone"):
        assert f'name="{name}"' in page
    assert 'name="job-team"' not in page and 'name="job-data"' not in page


def test_a_schedule_is_made_of_a_jobs_fields(client, member, team):
    client.force_login(member)

    answer = client.post("/schedules/", JOB)

    schedule = Schedule.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/schedules/#schedule-{schedule.pk}"
    assert (schedule.name, schedule.cron, schedule.time_zone, schedule.template) == (
        "nightly report", "30 2 * * *", "Europe/Berlin", None,
    )  # fmt: skip
    assert schedule.job["command"] == "python3 /report.py --all" and schedule.job["time_limit_s"] == "1h"
    page = client.get("/schedules/").content.decode()
    assert "Made the schedule nightly report." in page
    assert "At 02:30 every day" in page and "the job <code>report</code>" in page


def test_each_bad_field_is_said_at_its_field_and_nothing_is_made(client, member, team):
    client.force_login(member)

    answer = client.post(
        "/schedules/", JOB | {"cron": "0 1 * *", "time_zone": "Mars/Olympus", "starting_deadline_s": "99999999999"}
    )
    bad_job = client.post("/schedules/", JOB | {"job-cpus": "0", "job-image": "nosuch"})

    page = answer.content.decode()
    assert answer.status_code == 400 and "five fields" in page
    assert 'id="id_time_zone_error"' in page
    assert 'id="id_starting_deadline_s_error"' in page and "less than or equal to 31622400" in page
    page = bad_job.content.decode()
    assert bad_job.status_code == 400 and "The job each run submits is not valid" in page
    assert 'id="id_job-cpus_error"' in page and "greater than or equal to 1" in page
    assert 'id="id_job-image_error"' in page and "The image nosuch is not registered" in page
    assert not Schedule.objects.exists()


def test_a_job_without_a_command_is_refused_in_the_submit_forms_words(client, member, team):
    client.force_login(member)

    answer = client.post("/schedules/", JOB | {"job-command": ""})

    assert answer.status_code == 400 and not Schedule.objects.exists()
    assert "command" in answer.content.decode().lower() and 'class="error"' in answer.content.decode()


def test_a_template_is_still_a_way_to_start_one(client, member, team):
    template = JobTemplate.objects.create(
        team=team, name="report", image=RuntimeImage.objects.get(), command="echo {who}", defaults={"who": "x"}
    )
    client.force_login(member)

    answer = client.post("/schedules/", JOB | {"runs": "template", "template": template.pk})

    assert answer.status_code == 302
    schedule = Schedule.objects.get()
    assert schedule.template == template and schedule.job is None


def test_choosing_a_template_without_one_says_so(client, member, team):
    client.force_login(member)

    answer = client.post("/schedules/", JOB | {"runs": "template"})

    assert answer.status_code == 400 and "Choose the template each run submits." in answer.content.decode()


def test_the_teams_most_schedules_is_refused_with_a_clear_message(client, member, team, settings):
    settings.E31_TEAM_MAX_SCHEDULES = 1
    schedule_of(member, team, name="first")
    client.force_login(member)

    answer = client.post("/schedules/", JOB)

    assert answer.status_code == 409
    assert "The team red has 1 schedules, the most E31_TEAM_MAX_SCHEDULES allows" in answer.content.decode()
    assert Schedule.objects.count() == 1 and ScheduleEvent.objects.count() == 0


def test_a_bad_cron_line_and_a_bad_job_field_are_both_said_at_once(client, member, team):
    client.force_login(member)

    answer = client.post("/schedules/", JOB | {"cron": "0 1 * *", "job-cpus": "0"})

    page = answer.content.decode()
    assert answer.status_code == 400 and not Schedule.objects.exists()
    assert 'id="id_cron_error"' in page and "A cron line has five fields" in page
    assert "The job each run submits is not valid: its fields below say why." in page
    assert 'id="id_job-cpus_error"' in page and "greater than or equal to 1" in page


def test_a_missing_name_does_not_hide_the_jobs_errors(client, member, team):
    client.force_login(member)

    answer = client.post("/schedules/", JOB | {"name": "", "job-image": "nosuch"})

    page = answer.content.decode()
    assert answer.status_code == 400
    assert 'id="id_name_error"' in page and page.count("This field is required.") == 1
    assert "The image nosuch is not registered" in page


def test_choosing_no_template_does_not_hide_a_bad_cron_line(client, member, team):
    client.force_login(member)

    answer = client.post("/schedules/", JOB | {"runs": "template", "cron": "0 1 * *"})

    page = answer.content.decode()
    assert answer.status_code == 400
    assert "Choose the template each run submits." in page and "A cron line has five fields" in page
    assert "Give exactly one of template and job" not in page
