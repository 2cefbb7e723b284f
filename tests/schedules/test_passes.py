"""The due pass's bounds: at most E31_SCHEDULES_PER_PASS schedules, each team's in turn, and no schedule begun
after a third of E31_SCHEDULES_EVERY_S; what a pass leaves is the next pass's, at its planned time."""

from datetime import UTC, datetime, timedelta

import pytest

from schedules import runs as runs_module
from schedules.models import Schedule, ScheduleRun
from schedules.runs import due_pass
from tests.factories import RuntimeImageFactory, member_of, schedule_of

T0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


@pytest.fixture(autouse=True)
def _image(db):
    RuntimeImageFactory(name="busybox")


def due_together(user, team, count: int, *, prefix: str = "s") -> list[Schedule]:
    """`count` schedules of the team, every minute, their first time T0 + 1 minute."""
    return [schedule_of(user, team, name=f"{prefix}{n:03}", cron="* * * * *", now=T0) for n in range(count)]


def test_a_pass_records_at_most_its_bound_taking_each_team_in_turn(member, team, other_team, settings):
    settings.E31_SCHEDULES_PER_PASS = 3
    due_together(member, team, 5)
    carol = member_of(other_team, "carol")
    schedule_of(carol, other_team, name="t000", cron="* * * * *", now=T0)

    assert due_pass(now=T0 + MINUTE + timedelta(seconds=1)) == 3

    recorded = sorted(ScheduleRun.objects.values_list("schedule__name", flat=True))
    assert recorded == ["s000", "s001", "t000"]


def test_the_schedules_a_pass_leaves_are_recorded_by_the_next_at_their_planned_time(member, team, settings):
    settings.E31_SCHEDULES_PER_PASS = 2
    schedules = due_together(member, team, 5)
    planned = T0 + MINUTE

    counts = [due_pass(now=planned + timedelta(seconds=s)) for s in (1, 16, 31)]

    assert counts == [2, 2, 1]
    runs = list(ScheduleRun.objects.select_related("job").order_by("recorded_at", "schedule__name"))
    assert {r.schedule_id for r in runs} == {s.pk for s in schedules}
    assert {r.planned_at for r in runs} == {planned}
    assert [int((r.recorded_at - planned).total_seconds()) for r in runs] == [1, 1, 16, 16, 31]
    assert all(r.status == "submitted" and r.job is not None for r in runs)
    assert set(Schedule.objects.values_list("next_run_at", flat=True)) == {planned + MINUTE}


def test_a_schedule_left_past_its_starting_deadline_is_missed(member, team, settings):
    settings.E31_SCHEDULES_PER_PASS = 1
    first = schedule_of(member, team, name="a", cron="* * * * *", starting_deadline_s=20, now=T0)
    second = schedule_of(member, team, name="b", cron="* * * * *", starting_deadline_s=20, now=T0)
    planned = T0 + MINUTE

    due_pass(now=planned + timedelta(seconds=1))
    due_pass(now=planned + timedelta(seconds=31))

    assert first.runs.get().status == "submitted"
    left = second.runs.get()
    assert (left.planned_at, left.status) == (planned, "missed")
    assert "past the starting deadline of 20 s" in left.reason and "more schedules were due" in left.reason


def test_a_slow_pass_stops_taking_schedules_after_a_third_of_the_interval(member, team, settings, monkeypatch):
    settings.E31_SCHEDULES_EVERY_S = 9
    monkeypatch.setattr(runs_module, "CHUNK", 3)
    due_together(member, team, 5)
    # The pass starts at 100 s; then before each chunk and schedule: 1 s in, 1 s, 2 s, 4 s (past 3 s: it stops).
    clock = iter([100.0, 101.0, 101.0, 102.0, 104.0, 104.0])
    monkeypatch.setattr(runs_module, "monotonic", lambda: next(clock))

    assert due_pass(now=T0 + MINUTE + timedelta(seconds=1)) == 2

    assert set(Schedule.objects.filter(runs__isnull=True).values_list("next_run_at", flat=True)) == {T0 + MINUTE}
    monkeypatch.setattr(runs_module, "monotonic", lambda: 0.0)
    assert due_pass(now=T0 + MINUTE + timedelta(seconds=16)) == 3  # the next pass takes the rest
