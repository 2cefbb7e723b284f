from celery import shared_task
from django.utils import timezone

from schedules import runs


@shared_task(name="schedules.due")
def record_due_runs() -> int:
    # One bounded pass in one process (runs.due_pass): the schedules it leaves are the next pass's.
    return runs.due_pass(now=timezone.now())
