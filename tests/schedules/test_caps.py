"""What a team's schedules may multiply: at most E31_TEAM_MAX_SCHEDULES schedules (paused ones count; one more
is a 409 naming the setting), at most E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE runs submitted per planned minute
(the others recorded refused, naming the setting; the first of a team's minute heard, as one event)."""

from datetime import UTC, datetime, timedelta

import pytest

from jobs.models import Job
from schedules.models import Schedule, ScheduleRun
from schedules.runs import due_pass
from tests.factories import RuntimeImageFactory, member_of, schedule_of
from tests.schedules.test_api import JOB, URL
from tests.schedules.test_page import template_of
from tests.workers import concurrently

T0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


@pytest.fixture(autouse=True)
def _image(db):
    RuntimeImageFactory(name="busybox")


@pytest.fixture
def heard():
    from schedules.signals import run_not_submitted

    found: list[ScheduleRun] = []

    def hear(sender, run, **kwargs):
        found.append(run)

    run_not_submitted.connect(hear)
    yield found
    run_not_submitted.disconnect(hear)


def due_together(user, team, count: int, *, prefix: str = "s") -> list[Schedule]:
    """`count` schedules of the team, every minute, their first time T0 + 1 minute."""
    return [schedule_of(user, team, name=f"{prefix}{n:03}", cron="* * * * *", now=T0) for n in range(count)]


# --- E31_TEAM_MAX_SCHEDULES ----------------------------------------------------------------------------


def test_a_schedule_past_the_teams_cap_is_a_409_naming_the_setting_paused_ones_counted(api, member, team, settings):
    settings.E31_TEAM_MAX_SCHEDULES = 2
    schedule_of(member, team, name="one")
    schedule_of(member, team, name="two", paused=True)

    answer = api.post(URL, {"name": "three", "cron": "@daily", "job": JOB}, format="json")

    assert answer.status_code == 409
    assert "E31_TEAM_MAX_SCHEDULES" in answer.json()["detail"] and "paused ones count" in answer.json()["detail"]
    assert Schedule.objects.count() == 2


def test_the_cap_is_per_team_and_room_comes_back_with_a_deletion(api, member, team, other_team, settings):
    settings.E31_TEAM_MAX_SCHEDULES = 1
    theirs = member_of(other_team, "carol")
    schedule_of(theirs, other_team, name="theirs")
    first = api.post(URL, {"name": "one", "cron": "@daily", "job": JOB}, format="json")
    assert first.status_code == 201
    assert api.post(URL, {"name": "two", "cron": "@daily", "job": JOB}, format="json").status_code == 409

    assert api.delete(f"{URL}{first.json()['id']}/").status_code == 204

    assert api.post(URL, {"name": "two", "cron": "@daily", "job": JOB}, format="json").status_code == 201


def test_the_page_says_the_cap_naming_the_setting(client, member, team, settings):
    settings.E31_TEAM_MAX_SCHEDULES = 1
    schedule_of(member, team)
    client.force_login(member)

    answer = client.post("/schedules/", {"name": "daily report", "cron": "@daily", "template": template_of(team).pk})

    assert answer.status_code == 409
    assert "has 1 schedules, the most E31_TEAM_MAX_SCHEDULES allows" in answer.content.decode()
    assert Schedule.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_creations_at_once_do_not_pass_the_cap_together(member, team, settings):
    from django.utils import timezone

    from schedules.caps import TooManySchedules
    from schedules.changes import create_schedule

    settings.E31_TEAM_MAX_SCHEDULES = 1

    def make(name: str):
        return lambda: create_schedule(team=team, name=name, cron="@daily", time_zone="UTC", template=None, job=JOB,
                                       by=member, now=timezone.now())  # fmt: skip

    errors = concurrently(make("a"), make("b"))

    assert Schedule.objects.count() == 1
    assert [type(e) for e in errors] == [TooManySchedules]


# --- E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE -------------------------------------------------------------------


def test_runs_past_the_minutes_cap_are_refused_naming_the_setting_and_the_first_heard(member, team, settings, heard):
    settings.E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE = 3
    due_together(member, team, 5)

    assert due_pass(now=T0 + MINUTE + timedelta(seconds=1)) == 5

    runs = list(ScheduleRun.objects.order_by("schedule__name"))
    assert [r.status for r in runs] == ["submitted"] * 3 + ["refused"] * 2
    assert "E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE" in runs[4].reason
    assert "submitted 3 runs planned in the minute of 2026-06-01 08:01" in runs[4].reason
    assert Job.objects.count() == 3
    assert [r.pk for r in heard] == [runs[3].pk]


def test_one_refusal_by_the_cap_is_heard_per_team_and_minute_across_passes(member, team, other_team, settings,
                                                                            heard):  # fmt: skip
    settings.E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE = 1
    settings.E31_SCHEDULES_PER_PASS = 2  # each pass a transaction of its own
    due_together(member, team, 4)
    due_together(member_of(other_team, "carol"), other_team, 2, prefix="t")

    while due_pass(now=T0 + MINUTE + timedelta(seconds=1)):
        pass
    due_pass(now=T0 + 2 * MINUTE + timedelta(seconds=1))  # the next minute: heard again, once per team
    while due_pass(now=T0 + 2 * MINUTE + timedelta(seconds=1)):
        pass

    refused = ScheduleRun.objects.filter(status="refused")
    assert refused.filter(schedule__team=team).count() == 6 and refused.filter(schedule__team=other_team).count() == 2
    assert sorted((r.schedule.team.slug, r.planned_at) for r in heard) == sorted([
        (team.slug, T0 + MINUTE), (team.slug, T0 + 2 * MINUTE),
        (other_team.slug, T0 + MINUTE), (other_team.slug, T0 + 2 * MINUTE),
    ])  # fmt: skip


def test_other_refusals_are_each_heard_beside_the_caps(member, team, settings, heard):
    settings.E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE = 1
    due_together(member, team, 5)
    Schedule.objects.filter(name__in=["s000", "s001"]).update(job=JOB | {"image": "gone"})

    due_pass(now=T0 + MINUTE + timedelta(seconds=1))

    runs = {r.schedule.name: r for r in ScheduleRun.objects.select_related("schedule")}
    assert [runs[f"s00{n}"].status for n in range(5)] == ["refused", "refused", "submitted", "refused", "refused"]
    assert "not registered" in runs["s000"].reason and "E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE" in runs["s003"].reason
    assert sorted(r.schedule.name for r in heard) == ["s000", "s001", "s003"]


def test_the_cap_is_per_team_and_per_planned_minute(member, team, other_team, settings):
    settings.E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE = 2
    due_together(member, team, 3)
    due_together(member_of(other_team, "carol"), other_team, 2, prefix="t")

    due_pass(now=T0 + MINUTE + timedelta(seconds=1))
    due_pass(now=T0 + 2 * MINUTE + timedelta(seconds=1))

    def statuses(team_, minute):
        runs = ScheduleRun.objects.filter(schedule__team=team_, planned_at=T0 + minute * MINUTE)
        return sorted(runs.values_list("status", flat=True))

    assert statuses(team, 1) == statuses(team, 2) == ["refused", "submitted", "submitted"]
    assert statuses(other_team, 1) == statuses(other_team, 2) == ["submitted", "submitted"]


def test_skipped_and_missed_runs_do_not_count(member, team, settings):
    settings.E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE = 1
    late = schedule_of(member, team, name="a-late", cron="* * * * *", starting_deadline_s=10, now=T0)
    schedule_of(member, team, name="b-fine", cron="*/5 * * * *", now=T0 - 3 * MINUTE)

    due_pass(now=T0 + 2 * MINUTE + timedelta(seconds=30))  # b's 08:00 is due too, a's 08:01 is late

    assert set(late.runs.values_list("status", flat=True)) == {"missed"}
    assert ScheduleRun.objects.get(schedule__name="b-fine").status == "submitted"


@pytest.mark.django_db(transaction=True)
def test_two_passes_at_once_count_each_others_runs(member, team, settings):
    settings.E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE = 20
    due_together(member, team, 30)

    errors = concurrently(*[lambda: due_pass(now=T0 + MINUTE + timedelta(seconds=1))] * 2)

    assert errors == []
    statuses = list(ScheduleRun.objects.values_list("status", flat=True))
    assert (len(statuses), statuses.count("submitted"), statuses.count("refused")) == (30, 20, 10)
    assert Job.objects.count() == 20
