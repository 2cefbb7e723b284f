from celery import shared_task
from django.utils import timezone

from isolation import checks


@shared_task(name="isolation.probe_pool")
def probe_pool() -> int:
    """Beat, daily: a round of probes on every active node, under each runtime."""
    return len(checks.probe_pool(now=timezone.now(), trigger="daily"))


@shared_task(name="isolation.judge")
def judge() -> int:
    """Beat, every scheduler period: judge the rounds whose jobs were all released."""
    return checks.judge_pending(now=timezone.now())
