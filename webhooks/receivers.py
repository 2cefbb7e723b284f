"""The events webhooks hear, each turned into deliveries inside the transaction that sent it."""

from datetime import datetime
from functools import partial
from typing import Any

from django.utils import timezone

from accounting.models import BudgetWarning
from jobs.models import Job, JobArray
from schedules.models import RunStatus, ScheduleRun
from webhooks import payloads
from webhooks.delivery import enqueue
from webhooks.hosts import webhooks_are_on
from webhooks.models import Event

SCHEDULE_EVENTS = {RunStatus.MISSED: Event.SCHEDULE_MISSED, RunStatus.REFUSED: Event.SCHEDULE_REFUSED}


def on_job_released(sender: object, *, job: Job, **kwargs: Any) -> None:
    if job.array_id is not None:  # an array is announced once, by array_released
        return
    enqueue(job.team_id, Event.JOB_RELEASED, partial(payloads.job_released, job), now=job.released_at or timezone.now())


def on_array_released(sender: object, *, array: JobArray, at: datetime, **kwargs: Any) -> None:
    enqueue(array.team_id, Event.ARRAY_RELEASED, partial(payloads.array_released, array), now=at)


def on_run_not_submitted(sender: object, *, run: ScheduleRun, **kwargs: Any) -> None:
    if (event := SCHEDULE_EVENTS.get(RunStatus(run.status))) is None or not webhooks_are_on():
        return  # else reading the run's schedule would cost a query for nothing
    enqueue(run.schedule.team_id, event, partial(payloads.schedule_run, run), now=run.recorded_at)


def on_budget_crossed(sender: object, *, warning: BudgetWarning, **kwargs: Any) -> None:
    enqueue(warning.team_id, Event.BUDGET_WARNING, partial(payloads.budget_warning, warning), now=warning.at)
