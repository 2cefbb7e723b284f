"""Nodes: machines that lend their compute to the pool."""

import math
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import Sum

from pool.features import BadConstraint, Constraint, named
from pool.features import parse as parse_constraint
from pool.models import REASON_MAX, HeldCore, HeldGpu, Hold, Node, NodeStateChange
from pool.placement import FreeCapacity, Placement, closest_gap

PASS_LOCK = 0xE31


def hold_off_passes() -> None:
    """Wait for the scheduler pass in progress and keep the next out until this transaction ends. A pass
    reads the nodes without locking their rows, so heartbeats never wait for it; whatever changes which
    nodes take work (their state, their capacity) takes this first, before any row lock (a pass's holds
    lock their node's key, so the other order could deadlock)."""
    if connection.vendor == "postgresql":  # SQLite has none, and needs none: its transactions are immediate
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [PASS_LOCK])


MEMORY_RESERVE_MB = 1024  # left to the host, dockerd and the worker itself


@dataclass
class _PoolView:
    """Every registered node as this process last read them, and when (time.monotonic())."""

    read_at: float = -math.inf
    nodes: list[Node] = field(default_factory=list)


_view = _PoolView()


def pool_nodes(*, max_age_s: float = 0.0) -> list[Node]:
    """Every registered node, in any state (an offline node may come back). With `max_age_s`, what this
    process read at most that long ago, for a check that may see a node come or go that late; an
    empty view is always read again, since nodes register when their workers start."""
    now = time.monotonic()
    if not max_age_s or not _view.nodes or now - _view.read_at > max_age_s:
        _view.nodes, _view.read_at = list(Node.objects.all()), now
    return list(_view.nodes)  # a list of the caller's own: the view is this process's


def forget_pool_view() -> None:
    """The next pool_nodes(max_age_s=…) reads the nodes again."""
    _view.read_at = -math.inf


@dataclass(frozen=True)
class ScratchSpace:
    """A node's scratch disk as it reports it: free space, and the floor it keeps (MB)."""

    free_mb: int
    min_free_mb: int


@dataclass(frozen=True)
class Capacity:
    cpu_ids: list[int]
    memory_mb: int
    gpu_ids: list[str]


def detect_capacity() -> Capacity:
    """This machine's capacity, overridden by the E31_NODE_* settings."""
    cpu_ids = list(settings.E31_NODE_CPUS or sorted(os.sched_getaffinity(0)))
    memory_mb = settings.E31_NODE_MEMORY_MB or max(256, _machine_memory_mb() - MEMORY_RESERVE_MB)
    return Capacity(cpu_ids=cpu_ids, memory_mb=memory_mb, gpu_ids=list(settings.E31_NODE_GPUS))


def _machine_memory_mb() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


PROBES_FIRST = "its isolation probes must pass before it takes a team's job"
ENGINE_SILENT = "its container engine does not answer"


@transaction.atomic
def register(
    name: str, capacity: Capacity, *, now: datetime, proving: bool = False, features: list[str] | None = None
) -> Node:
    """Register (or re-register) a node; a draining node stays draining. With `proving`, it takes only its
    isolation probes until they pass (isolation.checks.prove). Each core and gpu is lent once: an id
    listed twice would be two free devices, and the double hold would fail a whole pass. With `features`
    (E31_NODE_FEATURES), the node has exactly those; without, it keeps those an operator set in the admin."""
    cpu_ids, gpu_ids = sorted(set(capacity.cpu_ids)), list(dict.fromkeys(capacity.gpu_ids))
    lent = {"cpu_ids": cpu_ids, "memory_mb": capacity.memory_mb, "gpu_ids": gpu_ids, "last_heartbeat": now}
    if features is not None:
        lent["features"] = sorted(set(features))
    first = Node.State.PROVING if proving else Node.State.ACTIVE
    defaults = {**lent, "registered_at": now, "state": first}
    hold_off_passes()
    node, created = Node.objects.select_for_update().get_or_create(name=name, defaults=defaults)
    if created:
        if proving:  # its history starts with why it takes no team's job yet (from offline: it was not there)
            node.state = Node.State.OFFLINE
            _change_state(node, Node.State.PROVING, now=now, by=None, reason=f"registered: {PROBES_FIRST}")
    else:
        for field_name, value in lent.items():
            setattr(node, field_name, value)
        node.save(update_fields=list(lent))
        if node.state == Node.State.OFFLINE or (proving and node.state == Node.State.ACTIVE):
            _change_state(
                node, first, now=now, by=None, reason="its worker registered again" + proving * f": {PROBES_FIRST}"
            )
    forget_pool_view()  # a process that also serves the form (the tests) sees the node at once
    return node


def heartbeat(name: str, *, now: datetime, scratch: ScratchSpace | None = None) -> bool:
    """Record that the node is alive, with its scratch space when given; False when it is unknown or offline."""
    fields: dict[str, object] = {"last_heartbeat": now}
    if scratch is not None:
        fields |= {"scratch_free_mb": scratch.free_mb, "scratch_min_free_mb": scratch.min_free_mb}
    return Node.objects.filter(name=name).exclude(state=Node.State.OFFLINE).update(**fields) == 1


def mark_lost_nodes(*, now: datetime, after: timedelta) -> list[Node]:
    """Mark offline the nodes whose last heartbeat is older than `after`; return them. Each is claimed
    on the heartbeat it was seen with, so a beat at that moment, or a second reaper, does not race it."""
    lost = []
    stale = Node.objects.exclude(state=Node.State.OFFLINE).filter(last_heartbeat__lt=now - after)
    for node in stale:
        claimed = Node.objects.filter(pk=node.pk, last_heartbeat=node.last_heartbeat).exclude(state=Node.State.OFFLINE)
        reason = f"lost: no heartbeat since {node.last_heartbeat:%Y-%m-%d %H:%M:%S} UTC"
        with transaction.atomic():
            hold_off_passes()  # no pass holds on it once it is offline: the reaper releases what it holds
            changed = claimed.update(
                state=Node.State.OFFLINE, state_changed_by=None, state_changed_at=now, state_reason=reason
            )
            if changed == 1:
                NodeStateChange.objects.create(
                    node=node, from_state=node.state, to_state=Node.State.OFFLINE, at=now, reason=reason
                )
        if changed == 1:
            node.state, node.state_reason = Node.State.OFFLINE, reason
            lost.append(node)
    return lost


def engine_silent(name: str, *, now: datetime) -> bool:
    """An active node whose container engine does not answer goes proving: it takes no job until the
    engine answers and a round of its probes passes. True when it moved."""
    with transaction.atomic():
        hold_off_passes()
        node = Node.objects.select_for_update().filter(name=name, state=Node.State.ACTIVE).first()
        if node is None:
            return False
        _change_state(node, Node.State.PROVING, now=now, by=None, reason=ENGINE_SILENT)
    forget_pool_view()
    return True


def proven(node: Node, *, now: datetime, reason: str) -> bool:
    """A proving node whose probes passed becomes active; False when it was not proving any more."""
    with transaction.atomic():
        hold_off_passes()
        locked = Node.objects.select_for_update().filter(pk=node.pk, state=Node.State.PROVING).first()
        if locked is None:
            return False
        _change_state(locked, Node.State.ACTIVE, now=now, by=None, reason=reason[:REASON_MAX])
    node.state = Node.State.ACTIVE
    forget_pool_view()
    return True


def still_proving(node: Node, *, reason: str | None) -> bool:
    """Say why a proving node still takes no team's job (`reason`: what keeps its probes from running), or
    with None go back to the reason it went proving with; its state and history stay as they are. True
    when the reason it shows changed, so a caller that runs every heartbeat says so once."""
    if reason is None:
        went = NodeStateChange.objects.filter(node=node, to_state=Node.State.PROVING).order_by("-at", "-pk")
        reason = went.values_list("reason", flat=True).first() or PROBES_FIRST
    changed = (
        Node.objects.filter(pk=node.pk, state=Node.State.PROVING)
        .exclude(state_reason=reason[:REASON_MAX])
        .update(state_reason=reason[:REASON_MAX])
    )
    if changed:
        node.state_reason = reason[:REASON_MAX]
    return changed == 1


class NodeOffline(Exception):
    """The node cannot be moved so by hand: it is offline."""


class NodeProving(NodeOffline):
    """The node is proving its isolation: its probes, not an operator, make it active."""


def set_state(node: Node, state: str, *, now: datetime, acting_user: User | None = None, reason: str = "") -> Node:
    """Drain or resume a node, recording who did it, when and why (the system drains with no acting
    user). An offline node comes back only when its worker registers again: set by hand, it would
    look alive and be given work for a worker that is not there. Nor may a resume skip a node's
    isolation probes: a proving node is not resumed, and one drained while proving resumes proving."""
    if state not in (Node.State.ACTIVE, Node.State.DRAINING):
        raise ValueError(f"a node is drained or resumed, not set to {state!r}")
    with transaction.atomic():
        hold_off_passes()
        locked = Node.objects.select_for_update().get(pk=node.pk)
        if locked.state == Node.State.OFFLINE:
            raise NodeOffline(f"node {node.name} is offline; it comes back when its worker starts again")
        if state == Node.State.ACTIVE and locked.state == Node.State.PROVING:
            raise NodeProving(f"node {node.name} is proving its isolation; it becomes active once its probes pass")
        if state == Node.State.ACTIVE and locked.state == Node.State.DRAINING and _drained_while_proving(locked):
            state, reason = Node.State.PROVING, f"{reason or 'resumed by an operator'}: {PROBES_FIRST}"
        if locked.state != state:
            why = "drained" if state == Node.State.DRAINING else "resumed"
            _change_state(
                locked, state, now=now, by=acting_user, reason=(reason or f"{why} by an operator")[:REASON_MAX]
            )
    node.state, node.state_changed_at = locked.state, locked.state_changed_at
    node.state_changed_by, node.state_reason = locked.state_changed_by, locked.state_reason
    return node


def _drained_while_proving(node: Node) -> bool:
    """Whether the node was proving when it was drained (by hand, or by a failed probe): resumed, it proves
    itself again rather than skip its probes."""
    last = NodeStateChange.objects.filter(node=node).order_by("-at", "-pk").values_list("from_state", flat=True)
    return last.first() == Node.State.PROVING


def _change_state(node: Node, state: str, *, now: datetime, by: User | None, reason: str) -> None:
    """Move the (locked or freshly claimed) node to `state`, with a row of its history."""
    NodeStateChange.objects.create(node=node, from_state=node.state, to_state=state, by=by, at=now, reason=reason)
    Node.objects.filter(pk=node.pk).update(state=state, state_changed_by=by, state_changed_at=now, state_reason=reason)
    node.state, node.state_changed_by, node.state_changed_at, node.state_reason = state, by, now, reason


def set_features(node: Node, features: list[str]) -> Node:
    """Label the node with `features` (pool.features.parse_features made them), as an operator does in the
    admin; its worker's next registration replaces them if it sets E31_NODE_FEATURES."""
    node.features = sorted(set(features))
    Node.objects.filter(pk=node.pk).update(features=node.features)
    forget_pool_view()  # the form of this process judges constraints against them at once
    return node


def free_capacity(nodes: list[Node]) -> dict[int, FreeCapacity]:
    """Free cores, memory and gpus of each node, in three queries whatever the number of nodes."""
    ids = [n.pk for n in nodes]
    held_cores: dict[int, set[int]] = {i: set() for i in ids}
    for node_id, core in HeldCore.objects.filter(node_id__in=ids).values_list("node_id", "core"):
        held_cores[node_id].add(core)
    held_gpus: dict[int, set[str]] = {i: set() for i in ids}
    for node_id, device in HeldGpu.objects.filter(node_id__in=ids).values_list("node_id", "device"):
        held_gpus[node_id].add(device)
    held_memory = dict(
        Hold.objects.filter(node_id__in=ids, released_at__isnull=True)
        .values("node_id")
        .annotate(total=Sum("memory_mb"))
        .values_list("node_id", "total")
    )
    return {
        n.pk: FreeCapacity(
            cpu_ids=[c for c in n.cpu_ids if c not in held_cores[n.pk]],
            memory_mb=n.memory_mb - (held_memory.get(n.pk) or 0),
            gpu_ids=[g for g in n.gpu_ids if g not in held_gpus[n.pk]],
        )
        for n in nodes
    }


def check_constraint(text: str) -> Constraint:
    """A job's constraint, parsed and judged against the registered nodes' features; raises BadConstraint
    naming the feature no node has (an empty pool judges nothing yet: its nodes register when they start)."""
    constraint = parse_constraint(text)
    nodes = list(Node.objects.only("features"))
    if nodes and not any(constraint.allows(frozenset(n.features)) for n in nodes):
        raise BadConstraint(f"no node of the pool has {named(closest_gap(constraint, nodes))}")
    return constraint


# Holds: compute held for a job on one node, from hold_many to release_hold (the meter runs while it is held).


@transaction.atomic
def hold_many(placements: list[Placement], *, now: datetime) -> list[Hold]:
    """Hold exact cores, memory and gpus for each placement; the caller locked the nodes and moves the jobs."""
    if not placements:
        return []
    holds = Hold.objects.bulk_create(
        [
            Hold(job_id=p.job_id, node=p.node, attempt=p.attempt, cpu_set=sorted(p.cpu_set), memory_mb=p.memory_mb,
                 gpu_ids=list(p.gpu_ids), held_at=now)
            for p in placements
        ]
    )  # fmt: skip
    HeldCore.objects.bulk_create(
        [HeldCore(node=p.node, core=c, hold=h) for p, h in zip(placements, holds, strict=True) for c in p.cpu_set]
    )
    gpus = [HeldGpu(node=p.node, device=d, hold=h) for p, h in zip(placements, holds, strict=True) for d in p.gpu_ids]
    if gpus:
        HeldGpu.objects.bulk_create(gpus)
    return holds


@transaction.atomic
def release_hold(hold: Hold, *, now: datetime) -> Hold:
    """Give its cores and gpus back to the pool; the meter stops at `now`."""
    if hold.released_at is not None:
        return hold
    hold.released_at = max(now, hold.held_at)
    hold.save(update_fields=["released_at"])
    HeldCore.objects.filter(hold=hold).delete()
    HeldGpu.objects.filter(hold=hold).delete()
    return hold
