from celery import shared_task
from django.utils import timezone

from notify import digest

# --- the morning digest


@shared_task(name="notify.digests")
def prepare_digests() -> int:
    return digest.prepare(now=timezone.now())
