"""The due pass under a controlled clock: each planned time recorded once (daylight-saving changes included),
concurrency, late and missed runs, refusals, and two passes at once recording each run once."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounting.models import Budget, BudgetUnit
from jobs.lifecycle.actions import cancel
from jobs.models import Job, JobArray, Outcome, Stage
from schedules import runs as runs_module
from schedules.models import Schedule, ScheduleEvent, ScheduleRun
from schedules.runs import MISSED_ROWS, due_pass, first_planned, run_now
from schedules.signals import run_not_submitted
from teams.models import Membership
from tests.factories import RuntimeImageFactory, schedule_of
from tests.workers import concurrently

T0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


@pytest.fixture(autouse=True)
def _image(db):
    RuntimeImageFactory(name="busybox")


@pytest.fixture
def not_submitted():
    heard: list[ScheduleRun] = []

    def hear(sender, run, **kwargs):
        heard.append(run)

    run_not_submitted.connect(hear)
    yield heard
    run_not_submitted.disconnect(hear)


def passes(start: datetime, end: datetime, every: timedelta = timedelta(seconds=15)) -> None:
    """A due pass every `every` from `start` to `end`, as beat runs them."""
    at = start
    while at <= end:
        due_pass(now=at)
        at += every


def planned(schedule: Schedule) -> list[datetime]:
    return list(schedule.runs.order_by("planned_at").values_list("planned_at", flat=True))


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_a_due_schedule_submits_its_job_once_and_moves_to_its_next_time(member, team):
    schedule = schedule_of(member, team, cron="0 1 * * *", time_zone="Europe/Berlin", now=T0)
    assert schedule.next_run_at == utc(2026, 6, 1, 23, 0)  # 01:00 CEST

    assert due_pass(now=utc(2026, 6, 1, 22, 59, 59)) == 0
    assert due_pass(now=utc(2026, 6, 1, 23, 0, 10)) == 1
    assert due_pass(now=utc(2026, 6, 1, 23, 0, 25)) == 0

    run = schedule.runs.get()
    assert (run.planned_at, run.status, run.reason) == (utc(2026, 6, 1, 23, 0), "submitted", "")
    assert run.job is not None and run.job.name == "nightly" and run.job.submitted_by == member
    schedule.refresh_from_db()
    assert schedule.next_run_at == utc(2026, 6, 2, 23, 0)
    assert Job.objects.count() == 1


def test_a_paused_schedule_records_nothing(member, team):
    schedule_of(member, team, cron="* * * * *", now=T0, paused=True)

    passes(T0, T0 + 5 * MINUTE)

    assert not ScheduleRun.objects.exists() and not Job.objects.exists()


# --- daylight-saving changes ------------------------------------------------------------------------


def test_berlin_spring_forward_runs_the_gaps_times_once_at_the_first_instant_after(member, team):
    # 29 March 2026: 02:00 CET is 03:00 CEST (01:00 UTC); 02:00 and 02:30 do not exist.
    start = utc(2026, 3, 28, 23, 50)
    schedule = schedule_of(member, team, cron="*/30 * * * *", time_zone="Europe/Berlin", now=start)

    passes(start, utc(2026, 3, 29, 2, 1), every=timedelta(minutes=1))

    assert planned(schedule) == [
        utc(2026, 3, 29, 0, 0), utc(2026, 3, 29, 0, 30),  # 01:00, 01:30 CET
        utc(2026, 3, 29, 1, 0),  # 02:00, 02:30 (the gap) and 03:00 CEST: one run
        utc(2026, 3, 29, 1, 30), utc(2026, 3, 29, 2, 0),  # 03:30, 04:00 CEST
    ]  # fmt: skip
    assert set(schedule.runs.values_list("status", flat=True)) == {"submitted"}
    assert Job.objects.count() == 5


def test_berlin_fall_back_runs_the_repeated_times_once(member, team):
    # 25 October 2026: 03:00 CEST is 02:00 CET again (01:00 UTC); 02:00 and 02:30 happen twice.
    start = utc(2026, 10, 24, 23, 10)
    schedule = schedule_of(member, team, cron="*/30 * * * *", time_zone="Europe/Berlin", now=start)

    passes(start, utc(2026, 10, 25, 2, 1), every=timedelta(minutes=1))

    assert planned(schedule) == [
        utc(2026, 10, 24, 23, 30),  # 01:30 CEST
        utc(2026, 10, 25, 0, 0), utc(2026, 10, 25, 0, 30),  # 02:00, 02:30 CEST (and not again in CET)
        utc(2026, 10, 25, 2, 0),  # 03:00 CET
    ]  # fmt: skip


def test_new_york_spring_forward_and_fall_back_run_a_daily_time_once(member, team):
    # 8 March 2026: 02:00 EST is 03:00 EDT (07:00 UTC): the 02:30 run is at 03:00 EDT.
    gap = schedule_of(
        member, team, name="gap", cron="30 2 * * *", time_zone="America/New_York", now=utc(2026, 3, 7, 12)
    )
    passes(utc(2026, 3, 8, 6, 55), utc(2026, 3, 8, 7, 5))
    assert planned(gap) == [utc(2026, 3, 8, 7, 0)]
    gap.refresh_from_db()
    assert gap.next_run_at == utc(2026, 3, 9, 6, 30)  # 02:30 EDT

    # 1 November 2026: 02:00 EDT is 01:00 EST (06:00 UTC): 01:30 happens twice, its run once, the first.
    twice = schedule_of(
        member, team, name="twice", cron="30 1 * * *", time_zone="America/New_York", now=utc(2026, 10, 31, 12)
    )
    passes(utc(2026, 11, 1, 5, 25), utc(2026, 11, 1, 6, 35), every=timedelta(minutes=1))
    assert planned(twice) == [utc(2026, 11, 1, 5, 30)]  # 01:30 EDT
    twice.refresh_from_db()
    assert twice.next_run_at == utc(2026, 11, 2, 6, 30)  # 01:30 EST


# --- concurrency ------------------------------------------------------------------------------------


def test_forbid_skips_while_the_last_run_is_not_released_naming_it(member, team):
    schedule = schedule_of(member, team, cron="* * * * *", concurrency="forbid", now=T0)

    due_pass(now=T0 + MINUTE)
    first = schedule.runs.get().job
    due_pass(now=T0 + 2 * MINUTE)
    cancel(first, now=T0 + 2 * MINUTE)
    due_pass(now=T0 + 3 * MINUTE)

    runs = list(schedule.runs.order_by("planned_at"))
    assert [r.status for r in runs] == ["submitted", "skipped", "submitted"]
    assert f"(job {first.pk}) is still at submit" in runs[1].reason and "forbid" in runs[1].reason
    assert runs[1].job is None and Job.objects.count() == 2


def test_replace_cancels_the_last_run_then_submits(member, team):
    schedule = schedule_of(member, team, cron="* * * * *", concurrency="replace", now=T0)

    due_pass(now=T0 + MINUTE)
    due_pass(now=T0 + 2 * MINUTE)

    first, second = schedule.runs.order_by("planned_at")
    first.job.refresh_from_db()
    assert (first.job.stage, first.job.outcome) == (Stage.RELEASE, Outcome.CANCELLED)
    assert second.status == "submitted" and second.job.stage == Stage.SUBMIT
    assert f"(job {first.job.pk})" in second.reason and "cancelled" in second.reason


def test_replace_cancels_the_last_arrays_tasks(member, team):
    sweep = {"name": "sweep", "image": "busybox", "command": ["true"], "cpus": 1, "memory_mb": 64, "time_limit_s": 60}
    schedule = schedule_of(
        member, team, cron="* * * * *", concurrency="replace", now=T0, job=sweep | {"indices": "0-2"}
    )

    due_pass(now=T0 + MINUTE)
    due_pass(now=T0 + 2 * MINUTE)

    first, second = schedule.runs.order_by("planned_at")
    assert set(Job.objects.filter(array=first.array).values_list("outcome", flat=True)) == {Outcome.CANCELLED}
    assert second.array is not None and second.array.size == 3 and f"(array {first.array.pk})" in second.reason


def test_replace_refused_leaves_the_last_run_going(member, team, settings):
    schedule = schedule_of(member, team, cron="* * * * *", concurrency="replace", now=T0)
    due_pass(now=T0 + MINUTE)
    RuntimeImageFactory(name="other")
    Schedule.objects.filter(pk=schedule.pk).update(job=schedule.job | {"image": "gone"})

    due_pass(now=T0 + 2 * MINUTE)

    first, second = schedule.runs.order_by("planned_at")
    assert second.status == "refused" and "gone is not registered" in second.reason
    first.job.refresh_from_db()
    assert first.job.stage == Stage.SUBMIT


def test_allow_submits_while_the_last_run_goes_on(member, team):
    schedule = schedule_of(member, team, cron="* * * * *", concurrency="allow", now=T0)

    passes(T0 + MINUTE, T0 + 3 * MINUTE, every=MINUTE)

    assert [r.status for r in schedule.runs.all()] == ["submitted"] * 3
    assert Job.objects.filter(stage=Stage.SUBMIT).count() == 3


# --- late and missed runs ---------------------------------------------------------------------------


def test_with_no_deadline_only_the_latest_late_run_is_submitted(member, team, not_submitted):
    schedule = schedule_of(member, team, cron="* * * * *", now=T0)  # next: T0 + 1 min

    due_pass(now=T0 + 4 * MINUTE + timedelta(seconds=20))  # beat was down for 4 planned times

    runs = list(schedule.runs.order_by("planned_at"))
    assert [r.planned_at for r in runs] == [T0 + n * MINUTE for n in (1, 2, 3, 4)]
    assert [r.status for r in runs] == ["missed", "missed", "missed", "submitted"]
    assert (
        runs[0].reason == "Missed: superseded by the run of 2026-06-01 08:04 UTC, as at most one late run is submitted."
    )
    assert Job.objects.count() == 1 and runs[3].job is not None
    assert not_submitted == runs[:3]


def test_with_a_deadline_runs_later_than_it_are_missed_and_the_latest_within_it_submitted(member, team):
    schedule = schedule_of(member, team, cron="* * * * *", starting_deadline_s=100, now=T0)

    due_pass(now=T0 + 4 * MINUTE + timedelta(seconds=30))  # 08:01 and 08:02 past 100 s; 08:03 and 08:04 within

    runs = list(schedule.runs.order_by("planned_at"))
    assert [r.status for r in runs] == ["missed", "missed", "missed", "submitted"]
    assert runs[0].reason == (
        "Missed: 210 s after its planned time, past the starting deadline of 100 s (the pool or beat was down, or "
        "more schedules were due than the passes record in time)."
    )
    assert "superseded by the run of 2026-06-01 08:04" in runs[2].reason


def test_with_a_deadline_passed_by_every_late_run_none_is_submitted(member, team):
    schedule = schedule_of(member, team, cron="*/5 * * * *", starting_deadline_s=10, now=T0)

    due_pass(now=T0 + 11 * MINUTE)

    assert [r.status for r in schedule.runs.order_by("planned_at")] == ["missed", "missed"]
    assert not Job.objects.exists()
    schedule.refresh_from_db()
    assert schedule.next_run_at == T0 + 15 * MINUTE


def test_a_week_down_records_a_handful_of_rows_and_one_run(member, team):
    week = timedelta(days=7)
    # The same rows from an outage of MISSED_ROWS + 2 minutes: the pass's queries for it are the bound.
    short = schedule_of(member, team, cron="* * * * *", now=T0, name="short")
    with CaptureQueriesContext(connection) as short_outage:
        due_pass(now=T0 + (MISSED_ROWS + 2) * MINUTE + timedelta(seconds=5))
    assert len(planned(short)) == MISSED_ROWS + 2
    Schedule.objects.filter(pk=short.pk).update(paused=True)
    schedule = schedule_of(member, team, cron="* * * * *", now=T0)

    with CaptureQueriesContext(connection) as week_down:
        due_pass(now=T0 + week + timedelta(seconds=5))

    runs = list(schedule.runs.order_by("planned_at"))
    assert len(runs) == MISSED_ROWS + 2
    assert [r.status for r in runs] == ["missed"] * (MISSED_ROWS + 1) + ["submitted"]
    assert runs[0].planned_at == T0 + MINUTE and runs[-1].planned_at == T0 + week
    assert runs[0].reason == (
        f"Missed while no pass ran: {7 * 24 * 60 - MISSED_ROWS - 1} planned times from 2026-06-01 08:01 UTC to "
        "2026-06-08 07:54 UTC, recorded as this one row."
    )
    assert [r.planned_at for r in runs[1:]] == [T0 + week - n * MINUTE for n in range(MISSED_ROWS, -1, -1)]
    assert Job.objects.filter(schedule_runs__schedule=schedule).count() == 1
    # Nothing is read or written per planned time walked: 10,080 of them cost what 7 do.
    assert len(week_down) <= len(short_outage), [q["sql"] for q in week_down.captured_queries]


# --- refusals ---------------------------------------------------------------------------------------


def test_a_line_saved_before_the_checks_is_refused_once_and_the_schedule_paused(member, team, not_submitted):
    schedule = schedule_of(member, team, cron="* * * * *", now=T0)
    Schedule.objects.filter(pk=schedule.pk).update(cron="R * * * *")

    passes(T0 + MINUTE, T0 + 3 * MINUTE)

    run = ScheduleRun.objects.get()
    assert (run.status, run.planned_at) == ("refused", schedule.next_run_at)
    assert "'R' in the minute field uses R" in run.reason and "The schedule is paused" in run.reason
    assert Schedule.objects.get().paused and not Job.objects.exists()
    assert [r.pk for r in not_submitted] == [run.pk]


def test_the_platforms_pause_of_a_line_not_taken_is_an_audit_event_saying_why(member, team, client):
    schedule = schedule_of(member, team, name="nightly report", cron="* * * * *", now=T0)
    Schedule.objects.filter(pk=schedule.pk).update(cron="R * * * *")

    passes(T0 + MINUTE, T0 + 3 * MINUTE)

    event = ScheduleEvent.objects.get(schedule=schedule, action="paused")
    assert (event.actor, event.at) == (None, T0 + MINUTE)
    assert event.reason.startswith("Its cron line is not taken any more: 'R * * * *' is not standard cron")
    assert event.reason.endswith("Give it a standard line and resume it.")
    client.force_login(member)
    page = client.get("/schedules/").content.decode()
    assert "paused by the platform: Its cron line is not taken any more: &#x27;R * * * *&#x27;" in page
    assert "paused by someone no longer here" not in page


def test_a_run_past_the_budget_is_refused_with_the_reason(member, team, settings, not_submitted):
    settings.E31_RATE_CORE_HOUR = Decimal("1")
    Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("0.10"))
    big = {"name": "big", "image": "busybox", "command": ["true"], "cpus": 1, "memory_mb": 64, "time_limit_s": 3600}
    schedule = schedule_of(member, team, cron="* * * * *", now=T0, job=big)

    due_pass(now=T0 + MINUTE)

    run = schedule.runs.get()
    assert run.status == "refused" and run.reason.startswith("Over budget: team red's budget")
    assert run.job is None and not Job.objects.exists()
    assert not_submitted == [run]
    schedule.refresh_from_db()
    assert schedule.next_run_at == T0 + 2 * MINUTE


def test_an_array_declared_with_indices_is_submitted_and_linked(member, team):
    job = {
        "name": "sweep",
        "image": "busybox",
        "command": ["true"],
        "cpus": 1,
        "memory_mb": 64,
        "time_limit_s": 60,
        "indices": "0-9:3",
        "max_running": 2,
    }
    schedule = schedule_of(member, team, cron="* * * * *", now=T0, job=job)

    due_pass(now=T0 + MINUTE)

    run = schedule.runs.get()
    assert run.job is None and isinstance(run.array, JobArray), run.reason
    assert (run.array.name, run.array.size, run.array.max_running) == ("sweep", 4, 2)
    assert sorted(Job.objects.filter(array=run.array).values_list("array_index", flat=True)) == [0, 3, 6, 9]


def test_one_schedule_failing_stops_no_other(member, team):
    broken = schedule_of(member, team, name="broken", cron="* * * * *", now=T0)
    fine = schedule_of(member, team, name="fine", cron="* * * * *", now=T0)
    Schedule.objects.filter(pk=broken.pk).update(time_zone="Mars/Olympus")  # saved past the checks

    assert due_pass(now=T0 + MINUTE) == 1

    assert not broken.runs.exists() and fine.runs.get().status == "submitted"


# --- exactly once -----------------------------------------------------------------------------------


def test_a_planned_time_recorded_already_is_never_submitted_again(member, team):
    schedule = schedule_of(member, team, cron="* * * * *", now=T0)
    due_pass(now=T0 + MINUTE)
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=T0 + MINUTE)  # as a pass that lost its update

    assert due_pass(now=T0 + MINUTE + timedelta(seconds=15)) == 0

    assert schedule.runs.count() == 1 and Job.objects.count() == 1
    schedule.refresh_from_db()
    assert schedule.next_run_at == T0 + 2 * MINUTE


@pytest.mark.django_db(transaction=True)
def test_two_passes_at_once_record_each_run_once(member, team):
    schedules = [schedule_of(member, team, name=f"s{n}", cron="* * * * *", now=T0) for n in range(30)]
    counts: list[int] = []

    def one_pass() -> None:
        counts.append(due_pass(now=T0 + MINUTE + timedelta(seconds=1)))

    errors = concurrently(one_pass, one_pass)

    assert errors == [] and sum(counts) == 30
    assert ScheduleRun.objects.count() == 30 and Job.objects.count() == 30
    assert {s.pk for s in schedules} == set(ScheduleRun.objects.values_list("schedule", flat=True))
    assert set(Schedule.objects.values_list("next_run_at", flat=True)) == {T0 + 2 * MINUTE}


def test_first_planned_is_the_next_time_after_now(member, team):
    schedule = schedule_of(member, team, cron="@nightly", time_zone="America/New_York", now=T0)

    assert first_planned(schedule, now=T0) == utc(2026, 6, 2, 5, 0)  # 01:00 EDT
    assert first_planned(schedule, now=utc(2026, 6, 2, 5, 0)) == utc(2026, 6, 3, 5, 0)


def test_a_run_failing_keeps_the_rows_before_it_and_is_taken_again_by_the_next_pass(member, team, monkeypatch):
    schedule = schedule_of(member, team, cron="* * * * *", now=T0)
    later = T0 + 3 * MINUTE + timedelta(seconds=5)

    def broken(schedule, *, planned_at):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(runs_module, "submit_run", broken)
    assert due_pass(now=later) == 2  # the two superseded times; the third failed
    schedule.refresh_from_db()
    assert schedule.next_run_at == T0 + MINUTE and not Job.objects.exists()

    monkeypatch.undo()
    assert due_pass(now=later) == 1

    assert [r.status for r in schedule.runs.order_by("planned_at")] == ["missed", "missed", "submitted"]
    assert Job.objects.count() == 1


def test_a_run_the_platform_keeps_failing_is_refused_after_a_while_and_the_schedule_goes_on(
    member, team, monkeypatch, not_submitted
):
    schedule = schedule_of(member, team, cron="0 * * * *", now=T0)
    planned = T0 + timedelta(hours=1)

    def broken(schedule, *, planned_at):
        raise RuntimeError("a bug")

    monkeypatch.setattr(runs_module, "submit_run", broken)
    passes(planned, planned + runs_module.PLATFORM_RETRY - timedelta(seconds=1))
    assert not schedule.runs.exists()  # taken again and again meanwhile

    assert due_pass(now=planned + runs_module.PLATFORM_RETRY) == 1

    run = schedule.runs.get()
    assert run.status == "refused" and run.reason.startswith("Not submitted: the platform failed (RuntimeError)")
    assert not_submitted == [run]
    schedule.refresh_from_db()
    assert schedule.next_run_at == planned + timedelta(hours=1)


def test_a_run_asked_for_now_the_platform_fails_is_refused_at_once_and_heard(member, team, monkeypatch, not_submitted):
    schedule = schedule_of(member, team, cron="0 * * * *", now=T0)

    def broken(schedule, *, planned_at):
        raise RuntimeError("a bug")

    monkeypatch.setattr(runs_module, "submit_run", broken)
    run = run_now(schedule, by=member, now=T0 + MINUTE)  # no pass takes it again: said now, not raised

    assert run.status == "refused" and run.planned_at == T0 + MINUTE
    assert run.reason == "Not submitted: the platform failed (RuntimeError); it is logged. Asked for now by alice."
    assert not_submitted == [run] and not Job.objects.exists()
    schedule.refresh_from_db()
    assert schedule.next_run_at == T0 + timedelta(hours=1)


def test_a_planned_time_another_pass_recorded_costs_no_submission(member, team, monkeypatch):
    schedule = schedule_of(member, team, cron="* * * * *", now=T0)
    ScheduleRun.objects.create(
        schedule=schedule, planned_at=T0 + MINUTE, status="submitted", recorded_at=T0 + MINUTE
    )  # as the other pass's row, committed while this one planned

    def never(schedule, *, planned_at):
        raise AssertionError("submitted a time recorded already")

    monkeypatch.setattr(runs_module, "submit_run", never)
    assert due_pass(now=T0 + MINUTE) == 0


@pytest.mark.django_db(transaction=True)
def test_two_passes_over_teams_with_budgets_record_each_run_once_without_a_deadlock(
    member, team, other_team, monkeypatch, caplog
):
    Membership.objects.create(team=other_team, user=member)
    for each in (team, other_team):
        Budget.objects.create(team=each, unit=BudgetUnit.MONEY, monthly=Decimal("1000"))
    # Chunks of two schedules, of the teams red and blue, then blue and red, and so on: read in that order,
    # two chunks at once would each hold one team's row and wait for the other's.
    monkeypatch.setattr(runs_module, "CHUNK", 2)
    for n in range(24):
        schedule_of(member, (team, other_team, other_team, team)[n % 4], name=f"s{n}", cron="* * * * *", now=T0)
    counts: list[int] = []

    def one_pass() -> None:
        counts.append(due_pass(now=T0 + MINUTE + timedelta(seconds=1)))

    concurrently(one_pass, one_pass)  # a pass that raised leaves its count out

    assert sum(counts) == 24 and ScheduleRun.objects.filter(status="submitted").count() == Job.objects.count() == 24
    assert "could not record" not in caplog.text
