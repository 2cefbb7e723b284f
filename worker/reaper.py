"""Node loss: jobs held on a node that stopped heartbeating are released (or retried)."""

import logging
from datetime import datetime, timedelta

from django.conf import settings

from jobs import actions
from jobs.models import Job
from jobs.transitions import InvalidTransition
from pool.models import Node
from pool.nodes import mark_lost_nodes

log = logging.getLogger(__name__)


def reap_lost_nodes(*, now: datetime) -> list[str]:
    """Declare lost the nodes silent for E31_NODE_LOST_S and hand each of their jobs to jobs.actions.release_lost.

    Offline nodes that still have holds (a reaper that stopped half-way) are finished too.
    Returns the names of the nodes declared lost by this pass.
    """
    lost = mark_lost_nodes(now=now, after=timedelta(seconds=settings.E31_NODE_LOST_S))
    for node in lost:
        log.warning("node %s lost: last heartbeat %s", node.name, node.last_heartbeat)
    offline = Node.objects.filter(state=Node.State.OFFLINE, holds__released_at__isnull=True).distinct()
    for node in offline:
        jobs = Job.objects.filter(holds__node=node, holds__released_at__isnull=True).distinct()
        for job in jobs:
            try:
                actions.release_lost(job, node_name=node.name, last_heartbeat=node.last_heartbeat, now=now)
            except InvalidTransition:
                pass
    return [node.name for node in lost]
