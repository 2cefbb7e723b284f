"""Node loss: jobs held on a node that stopped heartbeating are released (or retried)."""

import logging
from contextlib import suppress
from datetime import datetime, timedelta

from django.conf import settings

from jobs.lifecycle import actions
from jobs.lifecycle.history import REAPER
from jobs.models import Job
from jobs.transitions import InvalidTransition
from pool.models import Node
from pool.nodes import mark_lost_nodes

log = logging.getLogger(__name__)


def reap_lost_nodes(*, now: datetime) -> list[str]:
    """Declare lost the silent nodes and release the jobs of every offline one (finishing a reaper stopped half-way)."""
    lost = mark_lost_nodes(now=now, after=timedelta(seconds=settings.E31_NODE_LOST_S))
    for node in lost:
        log.warning("node %s lost: last heartbeat %s", node.name, node.last_heartbeat)
    for node in Node.objects.filter(state=Node.State.OFFLINE, holds__released_at__isnull=True).distinct():
        for job in Job.objects.filter(holds__node=node, holds__released_at__isnull=True).distinct():
            with suppress(InvalidTransition):  # released meanwhile
                actions.release_lost(
                    job, node_name=node.name, last_heartbeat=node.last_heartbeat, now=now, actor=REAPER
                )
    return [node.name for node in lost]
