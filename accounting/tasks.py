from celery import shared_task

from accounting.verification import verify_and_keep


@shared_task(name="accounting.verify_ledger")
def verify_ledger_task() -> bool:
    """The periodic check, of the records since the last verified head only."""
    return bool(verify_and_keep(full=False))
