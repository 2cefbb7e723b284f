"""/schedules/<id>/delete/: the card's Delete leads to a question on a page of its own (no script needed), which
says what stays; only its POST deletes."""

from datetime import timedelta

from django.utils import timezone

from schedules.models import RunStatus, Schedule, ScheduleEvent, ScheduleRun
from tests.factories import schedule_of, submit_job


def runs_of(schedule, *statuses):
    """Runs recorded with these statuses, a minute apart; a submitted one with its job."""
    for minutes, status in enumerate(statuses):
        planned = timezone.now() - timedelta(minutes=minutes + 1)
        job = submit_job(schedule.created_by, schedule.team) if status == RunStatus.SUBMITTED else None
        ScheduleRun.objects.create(schedule=schedule, planned_at=planned, status=status, job=job,
                                   recorded_at=timezone.now())  # fmt: skip


def test_the_cards_delete_is_a_link_to_the_question_not_a_form(client, member, team):
    schedule = schedule_of(member, team, name="nightly")
    client.force_login(member)

    page = client.get("/schedules/").content.decode()

    assert f'<a href="/schedules/{schedule.pk}/delete/" aria-label="Delete nightly">Delete</a>' in page
    assert f'action="/schedules/{schedule.pk}/delete/"' not in page


def test_the_question_says_the_past_runs_jobs_stay_and_deletes_nothing(client, member, team):
    schedule = schedule_of(member, team, name="nightly")
    runs_of(schedule, RunStatus.SUBMITTED, RunStatus.SUBMITTED, RunStatus.MISSED)
    client.force_login(member)

    answer = client.get(f"/schedules/{schedule.pk}/delete/")

    page = answer.content.decode()
    assert answer.status_code == 200
    assert "Delete the schedule nightly?" in page
    assert "Its 2 past runs' jobs stay; the schedule, its planned times and the record of its runs go." in page
    assert f'<form method="post" action="/schedules/{schedule.pk}/delete/">' in page
    assert "Yes, delete nightly" in page
    assert f'<a href="/schedules/#schedule-{schedule.pk}">No, back to the schedules</a>' in page
    assert Schedule.objects.filter(pk=schedule.pk).exists() and ScheduleRun.objects.count() == 3
    assert not ScheduleEvent.objects.exists()


def test_the_question_words_one_past_run_and_none(client, member, team):
    once = schedule_of(member, team, name="once")
    runs_of(once, RunStatus.SUBMITTED, RunStatus.REFUSED)
    never = schedule_of(member, team, name="never")
    client.force_login(member)

    assert "Its 1 past run's job stays;" in client.get(f"/schedules/{once.pk}/delete/").content.decode()
    assert "It has submitted no job yet;" in client.get(f"/schedules/{never.pk}/delete/").content.decode()


def test_yes_deletes_the_schedule_and_says_so(client, member, team):
    schedule = schedule_of(member, team, name="nightly")
    runs_of(schedule, RunStatus.SUBMITTED)
    client.force_login(member)

    page = client.post(f"/schedules/{schedule.pk}/delete/", follow=True).content.decode()

    assert not Schedule.objects.exists() and not ScheduleRun.objects.exists()
    assert "Deleted the schedule nightly: the jobs it submitted stay." in page and "deleted by alice" in page


def test_another_teams_schedule_is_404_to_the_question_and_to_its_post(client, member, outsider, team):
    schedule = schedule_of(member, team, name="nightly")
    client.force_login(outsider)

    assert client.get(f"/schedules/{schedule.pk}/delete/").status_code == 404
    assert client.post(f"/schedules/{schedule.pk}/delete/").status_code == 404
    assert client.get(f"/schedules/{schedule.pk + 1}/delete/").status_code == 404
    assert Schedule.objects.filter(pk=schedule.pk).exists()


def test_delete_takes_only_get_and_post(client, member, team):
    schedule = schedule_of(member, team)
    client.force_login(member)

    assert client.delete(f"/schedules/{schedule.pk}/delete/").status_code == 405
    assert client.put(f"/schedules/{schedule.pk}/delete/").status_code == 405
    assert Schedule.objects.exists()
