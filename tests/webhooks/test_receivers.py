"""The events webhooks hear become deliveries, with the payload each event promises, for the webhooks that
asked for them; nothing while webhooks are off."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from accounting.models import BudgetWarning
from accounting.signals import budget_crossed
from jobs.models import JobArray
from jobs.signals import array_released, job_released
from schedules.models import RunStatus, Schedule, ScheduleRun
from schedules.runs import due_pass
from schedules.signals import run_not_submitted
from tests.factories import JobArrayFactory, RuntimeImageFactory, array_tasks, ended_job, schedule_of, webhook_of
from webhooks.delivery import enqueue
from webhooks.models import Delivery

pytestmark = pytest.mark.usefixtures("webhooks_on")

HOOK = "http://127.0.0.1:19009/hook"
EVERY = ["job.released", "array.released", "schedule.missed", "schedule.refused", "budget.warning"]


def test_a_released_job_is_delivered_with_its_ending(member, team, local_node):
    webhook, _ = webhook_of(team, member, HOOK)
    at = timezone.now()

    job = ended_job(member, team, outcome="failed", exit_code=3, reason="exit code 3", at=at, name="nightly")

    delivery = Delivery.objects.get()
    assert (delivery.webhook, delivery.event, delivery.status, delivery.created_at) == (
        webhook, "job.released", "pending", at,
    )  # fmt: skip
    assert delivery.payload == {
        "id": str(job.pk), "name": "nightly", "team": "red", "outcome": "failed", "exit_code": 3,
        "reason": "exit code 3", "released_at": at.isoformat(), "url": f"http://127.0.0.1:8000/jobs/{job.pk}/",
    }  # fmt: skip


def test_only_webhooks_of_the_team_that_asked_for_the_event_get_it(member, team, outsider, other_team, local_node):
    asked, _ = webhook_of(team, member, HOOK)
    webhook_of(team, member, HOOK, events=["array.released"])
    webhook_of(other_team, outsider, HOOK)
    paused, _ = webhook_of(team, member, HOOK)
    paused.active = False
    paused.save(update_fields=["active"])

    ended_job(member, team, outcome="succeeded", at=timezone.now())

    assert [d.webhook for d in Delivery.objects.all()] == [asked]


def test_an_array_task_is_not_announced_alone(member, team):
    webhook_of(team, member, HOOK, events=EVERY)
    array = JobArrayFactory(team=team, submitted_by=member)
    (task,) = array_tasks(array, RuntimeImageFactory(), [("release", "failed")])

    job_released.send(sender=type(task), job=task)

    assert not Delivery.objects.exists()


def test_a_released_array_is_delivered_with_its_counts(member, team):
    webhook_of(team, member, HOOK, events=["array.released"])
    at = timezone.now()
    array = JobArrayFactory(team=team, submitted_by=member, name="sweep", released_at=at)
    array_tasks(array, RuntimeImageFactory(), [("release", "failed"), ("release", "succeeded")] * 2, at=at)

    array_released.send(sender=JobArray, array=array, at=at)

    delivery = Delivery.objects.get()
    assert delivery.event == "array.released"
    assert delivery.payload == {
        "id": str(array.pk), "name": "sweep", "team": "red", "size": 4, "counts": {"failed": 2, "succeeded": 2},
        "released_at": at.isoformat(), "url": f"http://127.0.0.1:8000/arrays/{array.pk}/",
    }  # fmt: skip


@pytest.mark.parametrize("status", [RunStatus.MISSED, RunStatus.REFUSED])
def test_a_run_not_submitted_is_delivered_as_schedule_missed_or_refused(member, team, status):
    webhook_of(team, member, HOOK, events=EVERY)
    now = timezone.now()
    schedule = Schedule.objects.create(
        team=team, name="nightly", cron="0 1 * * *", time_zone="UTC", created_by=member, created_at=now, changed_at=now
    )
    run = ScheduleRun.objects.create(
        schedule=schedule, planned_at=now, status=status, reason="over the team's budget", recorded_at=now
    )

    run_not_submitted.send(sender=ScheduleRun, run=run)

    delivery = Delivery.objects.get()
    assert delivery.event == f"schedule.{status}"
    assert delivery.payload == {
        "schedule": schedule.pk, "name": "nightly", "team": "red", "planned_at": now.isoformat(),
        "status": str(status), "reason": "over the team's budget",
    }  # fmt: skip


def test_a_budget_warning_is_delivered(member, team):
    webhook_of(team, member, HOOK, events=["budget.warning"])
    at = timezone.now()
    warning = BudgetWarning.objects.create(
        team=team, month=date(2026, 12, 1), level=80, unit="money", spent=Decimal("81.20"), limit=Decimal("100.00"),
        at=at,
    )  # fmt: skip

    budget_crossed.send(sender=BudgetWarning, warning=warning)

    delivery = Delivery.objects.get()
    assert (delivery.event, delivery.created_at) == ("budget.warning", at)
    assert delivery.payload == {
        "team": "red", "month": "2026-12", "level": 80, "spent": "81.20", "limit": "100.00", "unit": "money",
    }  # fmt: skip


def test_nothing_is_written_while_webhooks_are_off(member, team, local_node, settings):
    webhook_of(team, member, HOOK, events=EVERY)
    settings.E31_WEBHOOK_ALLOWED_HOSTS = []

    ended_job(member, team, outcome="failed", at=timezone.now())

    assert not Delivery.objects.exists()


def test_an_event_no_webhook_asked_for_costs_one_query_and_no_payload(member, team, django_assert_num_queries):
    webhook_of(team, member, HOOK, events=["array.released"])

    def payload():
        raise AssertionError("built for nobody")

    with django_assert_num_queries(1):
        assert enqueue(team.pk, "job.released", payload, now=timezone.now()) == []


def test_a_teams_minute_at_its_cap_of_runs_is_one_schedule_refused_delivery(member, team, settings):
    settings.E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE = 2
    RuntimeImageFactory(name="busybox")
    webhook_of(team, member, HOOK, events=["schedule.refused"])
    t0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
    for n in range(6):
        schedule_of(member, team, name=f"s{n}", cron="* * * * *", now=t0)

    due_pass(now=t0 + timedelta(minutes=1, seconds=1))

    assert ScheduleRun.objects.filter(status="refused").count() == 4
    delivery = Delivery.objects.get()
    assert delivery.event == "schedule.refused"
    assert "E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE" in delivery.payload["reason"]
