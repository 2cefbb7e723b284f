"""/schedules/<id>/edit/ and /pause/ from the browser: the rules of schedules.changes, as the API has them; and
another team's schedule 404 to every form."""

import pytest

from jobs.submit.forms import JobForm
from schedules.models import Schedule, ScheduleEvent, ScheduleRun
from tests.factories import RuntimeImageFactory, schedule_of

EDIT = {"name": "nightly", "cron": "0 3 * * *", "time_zone": "UTC", "concurrency": "allow", "runs": "job",
        "job-name": "rebuilt", "job-image": "busybox", "job-command": "true", "job-cpus": "1",
        "job-memory_mb": "64", "job-time_limit_s": "60"}  # fmt: skip


@pytest.fixture(autouse=True)
def _image(db):
    RuntimeImageFactory(name="busybox")


def test_the_edit_page_shows_the_schedules_fields_and_job(client, member, team):
    schedule = schedule_of(member, team, name="nightly")
    client.force_login(member)

    page = client.get(f"/schedules/{schedule.pk}/edit/").content.decode()

    assert "Change the schedule nightly" in page
    assert 'value="0 1 * * *"' in page and 'value="nightly"' in page
    assert "[&quot;true&quot;]" in page  # the job's command, in the submit form's box


def test_a_teammate_changing_the_job_becomes_its_runner(client, member, teammate, team):
    schedule = schedule_of(member, team, name="nightly")
    client.force_login(teammate)

    answer = client.post(f"/schedules/{schedule.pk}/edit/", EDIT)

    assert answer.status_code == 302
    schedule.refresh_from_db()
    assert schedule.cron == "0 3 * * *" and schedule.job["name"] == "rebuilt" and schedule.runner == teammate
    event = ScheduleEvent.objects.filter(action="changed").get()
    assert event.actor == teammate and event.changes["runner"] == ["alice", "bob"]
    page = client.get("/schedules/").content.decode()
    assert "Changed the schedule nightly." in page and "At 03:00 every day" in page


def test_a_teammate_changing_only_the_cron_line_leaves_the_runner(client, member, teammate, team):
    job = {"name": "nightly", "image": "busybox", "command": ["true"], "cpus": 1, "memory_mb": 64,
           "time_limit_s": 60, "env": {"A": "1"}, "outputs": ["a.txt", "b/"], "max_retries": 2}  # fmt: skip
    schedule = schedule_of(member, team, name="nightly", job=job)
    client.force_login(teammate)
    shown = client.get(f"/schedules/{schedule.pk}/edit/").context["form"]
    # As the browser sends the boxes: "yes (default)" of a yes-or-no box is its empty choice.
    fields = {
        f.html_name: f.value() for f in shown.job_fields() if f.value() is not True and f.value() not in (None, "")
    }

    answer = client.post(f"/schedules/{schedule.pk}/edit/", EDIT | fields | {"job-outputs": "a.txt\r\nb/"})

    assert answer.status_code == 302
    schedule.refresh_from_db()
    assert schedule.cron == "0 3 * * *" and schedule.job == job and schedule.runner is None
    assert list(ScheduleEvent.objects.filter(action="changed").values_list("changes", flat=True)) == [
        {"cron": ["0 1 * * *", "0 3 * * *"]}
    ]


@pytest.fixture
def submit_forms_built(monkeypatch):
    """How many submit forms (JobForm, ArrayForm) are built: each reads the person's teams and every image."""
    built = []
    build = JobForm.__init__

    def counted(form, *args, **kwargs):
        built.append(type(form).__name__)
        build(form, *args, **kwargs)

    monkeypatch.setattr(JobForm, "__init__", counted)
    return built


def test_an_edits_post_builds_the_submit_form_it_shows_once(client, member, team, submit_forms_built):
    schedule = schedule_of(member, team, name="nightly")
    client.force_login(member)
    shown = client.get(f"/schedules/{schedule.pk}/edit/").context["form"]
    fields = {
        f.html_name: f.value() for f in shown.job_fields() if f.value() is not True and f.value() not in (None, "")
    }
    submit_forms_built.clear()

    kept = client.post(f"/schedules/{schedule.pk}/edit/", EDIT | fields)
    kept_built = list(submit_forms_built)
    submit_forms_built.clear()
    changed = client.post(f"/schedules/{schedule.pk}/edit/", EDIT | fields | {"job-name": "rebuilt"})

    assert kept.status_code == changed.status_code == 302
    assert kept_built == ["ArrayForm"]  # the form the page shows; the job left as shown is not checked again
    assert submit_forms_built == ["ArrayForm", "JobForm"]  # and the job changed checked as a run submits it
    schedule.refresh_from_db()
    assert schedule.cron == "0 3 * * *" and schedule.job["name"] == "rebuilt"


def test_a_bad_edit_says_each_error_at_once_and_changes_nothing(client, member, team):
    schedule = schedule_of(member, team, name="nightly")
    client.force_login(member)

    answer = client.post(f"/schedules/{schedule.pk}/edit/", EDIT | {"cron": "61 * * * *", "job-memory_mb": "1"})

    page = answer.content.decode()
    assert answer.status_code == 400 and "<title>Error: Change nightly" in page
    assert 'id="id_cron_error"' in page and "61 is outside the minute field&#x27;s range, 0 to 59." in page
    assert 'id="id_job-memory_mb_error"' in page and "The job each run submits is not valid" in page
    schedule.refresh_from_db()
    assert schedule.cron == "0 1 * * *" and schedule.job["memory_mb"] == 64


def test_pause_without_javascript_comes_back_to_the_page_saying_so(client, member, team):
    schedule = schedule_of(member, team, name="nightly")
    client.force_login(member)

    page = client.post(f"/schedules/{schedule.pk}/pause/", follow=True).content.decode()

    assert "Paused nightly" in page and 'aria-label="Resume nightly"' in page


def test_another_teams_schedule_is_404_to_every_form(client, member, outsider, team):
    schedule = schedule_of(member, team, name="nightly")
    client.force_login(outsider)

    assert client.get(f"/schedules/{schedule.pk}/edit/").status_code == 404
    assert client.post(f"/schedules/{schedule.pk}/edit/", EDIT).status_code == 404
    assert client.post(f"/schedules/{schedule.pk}/run/").status_code == 404
    assert client.get(f"/schedules/{schedule.pk}/delete/").status_code == 404
    assert client.post(f"/schedules/{schedule.pk}/delete/").status_code == 404
    assert Schedule.objects.get().name == "nightly" and not ScheduleRun.objects.exists()
