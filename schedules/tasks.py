from celery import shared_task
from django.utils import timezone

from schedules import runs

# Schedules one task records; the due ones past the first batch go to other worker processes, so a minute
# when thousands are due is recorded by every process of the pool at once.
BATCH = 250


@shared_task(name="schedules.due")
def record_due_runs() -> int:
    now = timezone.now()
    due = runs.due_ids(now=now)
    for start in range(BATCH, len(due), BATCH):
        record_batch.delay(due[start : start + BATCH])
    return runs.record_due(due[:BATCH], now=now)


@shared_task(name="schedules.record")
def record_batch(schedule_ids: list[int]) -> int:
    # Its own clock: a batch that waited in the queue records what is due when it runs.
    return runs.record_due(schedule_ids, now=timezone.now())
