"""This machine as a node of the pool: start-up, heartbeat, and the clean-up a restart needs."""

import logging

from django.conf import settings
from django.utils import timezone

from jobs import lifecycle
from jobs.models import Job, Outcome, Stage
from jobs.sandbox import get_sandbox
from pool.nodes import detect_capacity, heartbeat, register

log = logging.getLogger(__name__)


def start_node() -> None:
    """Register this node, then clean up what a previous worker of this node left behind.

    1. Register (or re-register) with the capacity of this machine.
    2. Jobs this node was running have lost their worker: release them as node_lost.
    3. Remove containers of this node whose job is not held here any more.
    """
    now = timezone.now()
    name = settings.E31_NODE_NAME
    node = register(name, detect_capacity(), now=now)
    log.info("node %s registered: cores %s, %s MB, gpus %s", name, node.cpu_ids, node.memory_mb, node.gpu_ids)
    orphaned = Job.objects.filter(
        stage__in=[Stage.RUN, Stage.OUTPUT], holds__node=node, holds__released_at__isnull=True
    )
    for job in orphaned:
        try:
            lifecycle.release(
                job, outcome=Outcome.NODE_LOST, reason=f"the worker of node {name} restarted mid-run", now=now
            )
        except lifecycle.InvalidTransition:
            pass
    keep = {
        str(pk)
        for pk in Job.objects.filter(holds__node=node, holds__released_at__isnull=True).values_list("pk", flat=True)
    }
    removed = get_sandbox().orphans(node=name, keep=keep)
    if removed:
        log.warning("removed %d orphaned containers of node %s: %s", len(removed), name, removed)


def beat() -> None:
    heartbeat(settings.E31_NODE_NAME, now=timezone.now())
