from celery import shared_task

from webhooks.delivery import deliver_due


@shared_task(name="webhooks.deliver")
def deliver() -> int:
    return deliver_due()
