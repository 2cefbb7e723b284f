from celery import shared_task
from django.utils import timezone

from jobs.lifecycle.actions import PASS_LIMIT, schedule_pass
from jobs.scheduling.dispatch import nudge_scheduler, schedule_request_taken
from jobs.storage.retention import delete_due
from pool import windows


@shared_task(name="jobs.schedule")
def schedule_jobs() -> int:
    schedule_request_taken()  # before the pass reads the queue: a job committed after it nudges again
    held = len(schedule_pass(limit=PASS_LIMIT))
    if held >= PASS_LIMIT:  # the pass stopped at its limit: the jobs behind it need another one now
        nudge_scheduler()
    return held


@shared_task(name="jobs.retention")
def apply_retention() -> int:
    return len(delete_due(now=timezone.now()))


@shared_task(name="jobs.windows")
def turn_windows() -> dict[str, list[str]]:
    """Drain the nodes of the maintenance windows that started, resume those of the windows that ended; a
    pass then tells the waiting jobs, and starts those a window kept back."""
    turned = windows.turn(now=timezone.now())
    if turned.drained or turned.resumed:
        nudge_scheduler()
    return {"drained": turned.drained, "resumed": turned.resumed}
