from celery import shared_task
from django.utils import timezone

from notify import digest
from notify.sending import send_waiting


@shared_task(name="notify.send")
def send_mail() -> int:
    return send_waiting(now=timezone.now()).sent


@shared_task(name="notify.digests")
def prepare_digests() -> int:
    return digest.prepare(now=timezone.now())
