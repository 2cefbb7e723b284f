"""Celery tasks of accounting: thin adapters."""

from celery import shared_task

from accounting.verification import verify_and_keep


@shared_task(name="accounting.verify_ledger")
def verify_ledger_task() -> bool:
    """The periodic check: the records written since the last verified head (a whole walk on demand)."""
    return bool(verify_and_keep(full=False))
