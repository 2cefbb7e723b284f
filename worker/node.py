"""This machine as a node of the pool: start-up, heartbeat, and the clean-up a restart needs."""

import logging
from contextlib import suppress

from django.conf import settings
from django.utils import timezone

from isolation.checks import prove
from jobs.lifecycle import actions
from jobs.lifecycle.history import Actor
from jobs.models import Job
from jobs.scheduling.dispatch import request_schedule
from jobs.transitions import InvalidTransition
from pool.models import Node
from pool.nodes import ENGINE_SILENT, detect_capacity, engine_silent, heartbeat, register
from worker import database, watchdog
from worker.sandbox import get_sandbox, run_key
from worker.sandbox.base import ENGINE_PING_S
from worker.scratch import remove_leftovers
from worker.scratch import space as scratch_space

log = logging.getLogger(__name__)


def start_node() -> None:
    """Register this node, then clean up what a previous worker of this node left behind.

    1. Register (or re-register) with the capacity of this machine, and ask for a scheduler pass: the jobs
       waiting may start here now (the platform's scheduler worker runs it, whether this node was up or not).
    2. Release (or retry) the runs the previous worker was running, metered to its last heartbeat.
    3. Remove containers of this node whose job is not held here any more.
    4. Remove the scratch folders of runs no worker runs any more.
    """
    now = timezone.now()
    name = settings.E31_NODE_NAME
    last_seen = Node.objects.filter(name=name).values_list("last_heartbeat", flat=True).first() or now
    node = register(
        name, detect_capacity(), now=now, proving=settings.E31_PROBE_ON_START and settings.E31_PROVE_BEFORE_JOBS,
        features=settings.E31_NODE_FEATURES,
    )  # fmt: skip
    heartbeat(name, now=now, scratch=scratch_space())
    request_schedule()
    log.info(
        "node %s registered: cores %s, %s MB, gpus %s, features %s",
        name, node.cpu_ids, node.memory_mb, node.gpu_ids, node.features,
    )  # fmt: skip
    held_here = Job.objects.filter(holds__node=node, holds__released_at__isnull=True)
    for job in held_here.started():
        with suppress(InvalidTransition):  # released meanwhile
            actions.release_lost(job, node_name=name, last_heartbeat=last_seen, now=now, actor=Actor.node(name))
    keep = {run_key(pk, attempt) for pk, attempt in held_here.values_list("pk", "attempt")}
    removed = get_sandbox().orphans(node=name, keep=keep)
    if removed:
        log.warning("removed %d orphaned containers of node %s: %s", len(removed), name, removed)
    # Any node's held jobs are kept: nodes sharing a machine may share a scratch folder too.
    held = Job.objects.filter(holds__released_at__isnull=True).values_list("pk", flat=True)
    if left := remove_leftovers(keep={str(pk) for pk in held}):
        log.warning("removed %d leftover scratch folders of node %s: %s", len(left), name, left)


def beat() -> None:
    """One beat of the heartbeat thread, on a fresh connection since the thread is no request or task."""
    with database.unit_of_work():
        database.once_more(send_heartbeat)
        node = Node.objects.filter(name=settings.E31_NODE_NAME).exclude(state=Node.State.OFFLINE).first()
        if node is not None:
            try:
                look_after_engine(node)
            except Exception:  # a probe round that cannot start must not stop the watchdog below
                log.exception("node %s: looking after its engine failed", node.name)
            watchdog.look_after_runs(node, now=timezone.now())


def look_after_engine(node: Node) -> None:
    """An engine that does not answer makes an active node proving; a proving node's probes run once it answers."""
    sandbox = get_sandbox()
    if not sandbox.answers(ENGINE_PING_S):
        if engine_silent(node.name, now=timezone.now()):
            log.error("node %s: %s; it takes no job until it answers and its probes pass", node.name, ENGINE_SILENT)
        return
    if node.state != Node.State.PROVING:
        return
    started = prove(node, now=timezone.now(), engine_runtimes=sandbox.runtimes())
    if started:
        held = Job.objects.filter(holds__node=node, holds__released_at__isnull=True).values_list("pk", "attempt")
        if removed := sandbox.orphans(node=node.name, keep={run_key(pk, attempt) for pk, attempt in held}):
            log.warning(
                "node %s: removed %d containers of runs lost with its engine: %s", node.name, len(removed), removed
            )


def send_heartbeat() -> None:
    """A node declared lost while alive registers again; one an operator deleted stays out until restarted."""
    name = settings.E31_NODE_NAME
    if heartbeat(name, now=timezone.now(), scratch=scratch_space()):
        return
    if Node.objects.filter(name=name, state=Node.State.OFFLINE).exists():
        log.warning("node %s was declared lost while alive: registering again", name)
        start_node()
    else:
        log.warning("node %s is not registered: restart its worker to add it to the pool again", name)
