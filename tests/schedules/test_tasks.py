"""The task beat sends: it records the first batch of due schedules and sends the others to the workers."""

from datetime import timedelta

import time_machine
from django.utils import timezone

from jobs.models import Job
from schedules import tasks
from schedules.models import ScheduleRun
from tests.factories import RuntimeImageFactory, schedule_of


def test_the_due_task_records_a_batch_and_fans_the_rest_out(member, team, monkeypatch):
    RuntimeImageFactory(name="busybox")
    now = timezone.now()
    schedules = [schedule_of(member, team, name=f"s{n}", cron="* * * * *", now=now) for n in range(5)]
    sent: list[list[int]] = []
    monkeypatch.setattr(tasks, "BATCH", 2)
    monkeypatch.setattr(tasks.record_batch, "delay", lambda ids: sent.append(ids))

    with time_machine.travel(now + timedelta(minutes=1), tick=False):
        assert tasks.record_due_runs() == 2
        assert len(sent) == 2 and sorted(pk for batch in sent for pk in batch) == sorted(s.pk for s in schedules[2:])
        assert sum(tasks.record_batch(batch) for batch in sent) == 3
        assert tasks.record_batch(sent[0]) == 0  # a batch sent twice (two beats) records nothing more

    assert ScheduleRun.objects.count() == Job.objects.count() == 5
