from celery import shared_task

from accounting.verification import verify_and_keep


@shared_task(name="accounting.verify_ledger")
def verify_ledger_task() -> bool:
    return bool(verify_and_keep(full=False))
