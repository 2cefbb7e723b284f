"""The task beat sends: one bounded pass in the process that runs it, nothing sent to other workers."""

from datetime import timedelta

import time_machine
from django.utils import timezone

from jobs.models import Job
from schedules import tasks
from schedules.models import ScheduleRun
from tests.factories import RuntimeImageFactory, schedule_of


def test_the_due_task_records_one_bounded_pass_and_fans_nothing_out(member, team, settings, monkeypatch):
    RuntimeImageFactory(name="busybox")
    settings.E31_SCHEDULES_PER_PASS = 2
    now = timezone.now()
    for n in range(5):
        schedule_of(member, team, name=f"s{n}", cron="* * * * *", now=now)
    sent: list[str] = []
    monkeypatch.setattr("celery.app.task.Task.apply_async", lambda self, *a, **k: sent.append(self.name))

    with time_machine.travel(now + timedelta(minutes=1), tick=False):
        assert [tasks.record_due_runs() for _ in range(4)] == [2, 2, 1, 0]

    assert sent == []
    assert ScheduleRun.objects.count() == Job.objects.count() == 5
