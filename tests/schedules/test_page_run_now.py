"""POST /schedules/<id>/run/: one run now, recorded as a planned run is (as the schedule's runner, under its
concurrency, the team's runs per minute and the budget); whatever becomes of it is said on the page, never
a 500."""

import pytest

from jobs.models import Job
from jobtemplates.models import JobTemplate
from schedules import runs as runs_module
from schedules import views
from schedules.models import RunStatus, Schedule, ScheduleRun
from tests.factories import RuntimeImageFactory, schedule_of

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _image(db):
    RuntimeImageFactory(name="busybox")


@pytest.fixture
def broken_platform(monkeypatch):
    def broken(schedule, *, planned_at):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(runs_module, "submit_run", broken)


def test_run_now_submits_a_job_the_row_links_by_name(client, member, team, local_node):
    schedule = schedule_of(member, team, name="nightly")
    client.force_login(member)

    answer = client.post(f"/schedules/{schedule.pk}/run/", follow=True)

    job = Job.objects.get()
    run = ScheduleRun.objects.get()
    assert (run.status, run.job, job.submitted_by) == (RunStatus.SUBMITTED, job, member)
    page = answer.content.decode()
    assert "Ran nightly now: submitted nightly, as alice." in page
    assert f'the job <a href="/jobs/{job.pk}/">nightly</a>' in page
    assert "Asked for now by alice." in page
    schedule.refresh_from_db()
    assert schedule.next_run_at is not None  # its planned times stay as they were


def test_run_now_past_the_teams_runs_per_minute_is_refused_saying_so(client, member, team, settings, local_node):
    settings.E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE = 0
    schedule = schedule_of(member, team, name="nightly")
    client.force_login(member)

    page = client.post(f"/schedules/{schedule.pk}/run/", follow=True).content.decode()

    assert not Job.objects.exists()
    assert ScheduleRun.objects.get().status == RunStatus.REFUSED
    assert "nightly was not run now: Refused: the team red&#x27;s schedules have submitted 0 runs" in page
    assert "E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE allows" in page


def test_run_now_the_platform_fails_is_said_on_the_page_not_a_500(client, member, team, broken_platform):
    schedule = schedule_of(member, team, name="nightly")
    client.force_login(member)
    client.raise_request_exception = False

    answer = client.post(f"/schedules/{schedule.pk}/run/", follow=True)

    assert answer.status_code == 200
    page = answer.content.decode()
    assert "nightly was not run now: Not submitted: the platform failed (RuntimeError); it is logged." in page
    run = ScheduleRun.objects.get()
    assert run.status == RunStatus.REFUSED and run.reason.endswith("Asked for now by alice.")
    assert not Job.objects.exists()


def test_run_now_the_platform_fails_swaps_the_card_with_the_message_for_htmx(client, member, team, broken_platform):
    schedule = schedule_of(member, team, name="nightly")
    client.force_login(member)
    client.raise_request_exception = False

    answer = client.post(f"/schedules/{schedule.pk}/run/", **HTMX)

    page = answer.content.decode()
    assert answer.status_code == 200 and f'id="schedule-{schedule.pk}"' in page
    assert 'hx-swap-oob="true"' in page and "nightly was not run now: Not submitted: the platform failed" in page


def test_run_now_while_the_last_run_goes_on_and_concurrency_is_forbid_says_it_skipped(client, member, team, local_node):
    schedule = schedule_of(member, team, name="nightly", concurrency="forbid")
    client.force_login(member)
    client.post(f"/schedules/{schedule.pk}/run/")

    page = client.post(f"/schedules/{schedule.pk}/run/", follow=True).content.decode()

    assert Job.objects.count() == 1
    assert "nightly was not run now: Skipped: the run of" in page
    assert "is still at submit, and concurrency is forbid. Asked for now by alice." in page


def test_run_now_of_a_schedule_whose_template_was_deleted_says_it_has_nothing_to_submit(client, member, team):
    template = JobTemplate.objects.create(team=team, name="report", image=RuntimeImageFactory(), command="true")
    schedule = schedule_of(member, team, name="nightly", template=template)
    template.delete()
    client.force_login(member)

    page = client.post(f"/schedules/{schedule.pk}/run/", follow=True).content.decode()

    assert "nightly was not run now: Its template was deleted: the schedule has nothing to submit." in page
    assert ScheduleRun.objects.get().status == RunStatus.REFUSED


def test_a_paused_schedules_card_offers_to_run_it_once_saying_it_stays_paused(client, member, team):
    paused = schedule_of(member, team, name="paused one", paused=True)
    going = schedule_of(member, team, name="going one")
    client.force_login(member)

    page = client.get("/schedules/").content.decode()

    assert f'aria-describedby="schedule-{paused.pk}-run-note">Run once now</button>' in page
    assert f'<small class="muted" id="schedule-{paused.pk}-run-note">The schedule stays paused.</small>' in page
    assert 'aria-label="Run paused one once now"' in page
    assert 'aria-label="Run going one now">Run now</button>' in page and f"schedule-{going.pk}-run-note" not in page


def test_run_now_of_a_paused_schedule_runs_it_once_and_says_it_stays_paused(client, member, team, local_node):
    schedule = schedule_of(member, team, name="nightly", paused=True)
    planned = schedule.next_run_at
    client.force_login(member)

    page = client.post(f"/schedules/{schedule.pk}/run/", follow=True).content.decode()

    assert ScheduleRun.objects.get().status == RunStatus.SUBMITTED and Job.objects.count() == 1
    assert (
        "Ran nightly once now: submitted nightly, as alice. nightly stays paused: no planned run until it is resumed."
        in page
    )
    schedule.refresh_from_db()
    assert schedule.paused and schedule.next_run_at == planned


def test_run_now_of_a_paused_schedule_refused_says_it_stays_paused(client, member, team, settings, local_node):
    settings.E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE = 0
    schedule = schedule_of(member, team, name="nightly", paused=True)
    client.force_login(member)

    page = client.post(f"/schedules/{schedule.pk}/run/", **HTMX).content.decode()

    assert "nightly was not run now: Refused: the team red&#x27;s schedules have submitted 0 runs" in page
    assert "Asked for now by alice. nightly stays paused: no planned run until it is resumed." in page
    assert "Run once now" in page  # the card, swapped, still paused
    schedule.refresh_from_db()
    assert schedule.paused


def test_run_now_takes_only_post(client, member, team):
    schedule = schedule_of(member, team)
    client.force_login(member)

    assert client.get(f"/schedules/{schedule.pk}/run/").status_code == 405
    assert Schedule.objects.exists() and not ScheduleRun.objects.exists()


def test_run_now_of_a_schedule_deleted_meanwhile_is_404(client, member, team, monkeypatch):
    schedule = schedule_of(member, team, name="nightly")
    read = views.schedule_for

    def read_then_deleted(user, schedule_id):
        found = read(user, schedule_id)
        Schedule.objects.filter(pk=found.pk).delete()  # by another request, between the read and the run's lock
        return found

    monkeypatch.setattr(views, "schedule_for", read_then_deleted)
    client.force_login(member)
    client.raise_request_exception = False

    assert client.post(f"/schedules/{schedule.pk}/run/").status_code == 404
    assert not ScheduleRun.objects.exists()
