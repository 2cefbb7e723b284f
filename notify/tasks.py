from celery import shared_task
from django.utils import timezone

from jobs.scheduling import dispatch
from notify import digest
from notify.outbox import SEND_TASK
from notify.sending import send_waiting


@shared_task(name=SEND_TASK)
def send_mail() -> int:
    dispatch.pass_taken(SEND_TASK)  # before the pass reads the outbox: a mail written after it asks again
    return send_waiting(now=timezone.now()).sent


@shared_task(name="notify.digests")
def prepare_digests() -> int:
    return digest.prepare(now=timezone.now())
