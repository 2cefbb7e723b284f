"""What notify hears (jobs.signals, accounting.signals), inside the transaction that made it so: it only
writes the outbox's rows (notify.outbox); the sending is the outbox pass's."""

from typing import Any

from accounting.models import BudgetWarning
from accounting.signals import budget_crossed
from jobs.models import Job, JobArray
from jobs.signals import array_released, job_released
from notify import outbox


def on_job_released(sender: type[Job], *, job: Job, **kwargs: Any) -> None:
    if job.released_at is not None:
        outbox.job_ended(job, now=job.released_at)


def on_array_released(sender: type[JobArray], *, array: JobArray, at: Any, **kwargs: Any) -> None:
    outbox.array_ended(array, now=at)


def on_budget_crossed(sender: type[BudgetWarning], *, warning: BudgetWarning, **kwargs: Any) -> None:
    outbox.budget_crossed(warning)


def connect() -> None:
    job_released.connect(on_job_released, sender=Job, dispatch_uid="notify.job_released")
    array_released.connect(on_array_released, sender=JobArray, dispatch_uid="notify.array_released")
    budget_crossed.connect(on_budget_crossed, sender=BudgetWarning, dispatch_uid="notify.budget_crossed")
