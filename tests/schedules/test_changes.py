"""A schedule's changes: each one atomic function, each kept as an event naming who acted; next_run_at planned
from now on create, resume and a new cron line or zone."""

from datetime import UTC, datetime, timedelta

import pytest

from schedules.changes import change_schedule, create_schedule, delete_schedule, pause_schedule, resume_schedule
from schedules.models import Schedule, ScheduleEvent
from tests.factories import RuntimeImageFactory

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
JOB = {"name": "nightly", "image": "busybox", "command": ["true"], "cpus": 1, "memory_mb": 64, "time_limit_s": 60}


@pytest.fixture
def schedule(member, team):
    RuntimeImageFactory(name="busybox")
    return create_schedule(
        team=team, name="nightly", cron="0 1 * * *", time_zone="Europe/Berlin", template=None, job=JOB, by=member,
        now=NOW,
    )  # fmt: skip


def test_create_plans_the_first_run_and_keeps_a_created_event(schedule, member):
    assert schedule.next_run_at == datetime(2026, 3, 3, 0, 0, tzinfo=UTC)  # 01:00 in Berlin (CET)
    event = ScheduleEvent.objects.get()
    assert (event.action, event.actor, event.schedule_name, event.at) == ("created", member, "nightly", NOW)


def test_a_change_lists_each_field_before_and_after_and_replans_a_new_zone(schedule, teammate):
    later = NOW + timedelta(hours=1)

    changed = change_schedule(
        schedule, changes={"time_zone": "America/New_York", "name": "nightly"}, by=teammate, now=later
    )

    assert changed.next_run_at == datetime(2026, 3, 3, 6, 0, tzinfo=UTC)
    assert changed.changed_at == later
    event = ScheduleEvent.objects.get(action="changed")
    assert (event.actor, event.changes) == (teammate, {"time_zone": ["Europe/Berlin", "America/New_York"]})


def test_a_change_of_nothing_writes_no_event(schedule, member):
    change_schedule(schedule, changes={"name": "nightly", "cron": "0 1 * * *"}, by=member, now=NOW)

    assert not ScheduleEvent.objects.filter(action="changed").exists()


def test_a_change_of_the_name_keeps_the_planned_time(schedule, member):
    before = schedule.next_run_at

    change_schedule(schedule, changes={"name": "renamed"}, by=member, now=NOW + timedelta(days=3))

    assert Schedule.objects.get().next_run_at == before


def test_an_unknown_field_is_refused(schedule, member):
    with pytest.raises(ValueError, match="paused"):
        change_schedule(schedule, changes={"paused": True}, by=member, now=NOW)


def test_resume_plans_from_now_so_paused_over_times_are_not_caught_up(schedule, member, teammate):
    pause_schedule(schedule, by=member, now=NOW)
    back = NOW + timedelta(days=5)

    resumed = resume_schedule(schedule, by=teammate, now=back)

    assert resumed.next_run_at == datetime(2026, 3, 8, 0, 0, tzinfo=UTC)
    events = ScheduleEvent.objects.order_by("at", "pk").values_list("action", "actor__username")
    assert list(events) == [("created", "alice"), ("paused", "alice"), ("resumed", "bob")]


def test_pause_and_resume_twice_change_nothing_the_second_time(schedule, member):
    pause_schedule(schedule, by=member, now=NOW)
    pause_schedule(schedule, by=member, now=NOW)
    resume_schedule(schedule, by=member, now=NOW)
    resume_schedule(schedule, by=member, now=NOW)

    assert ScheduleEvent.objects.filter(action__in=["paused", "resumed"]).count() == 2


def test_delete_keeps_the_event_by_name(schedule, member, team):
    delete_schedule(schedule, by=member, now=NOW)

    assert not Schedule.objects.exists()
    deleted = ScheduleEvent.objects.get(action="deleted")
    assert (deleted.schedule, deleted.schedule_name, deleted.team, deleted.actor) == (None, "nightly", team, member)
    assert ScheduleEvent.objects.count() == 2  # the created event stays too, its schedule gone
