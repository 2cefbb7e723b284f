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
from pool.placement.backfill import closest_gap
from pool.placement.types import FreeCapacity, Placement

PASS_LOCK = 0xE31


def hold_off_passes() -> None:
    """Keep passes out until this transaction ends: whatever changes which nodes take work takes this first,
    before any row lock (a pass reads nodes unlocked, so heartbeats never wait; the other order could deadlock)."""
    if connection.vendor == "postgresql":  # SQLite has none, and needs none: its transactions are immediate
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [PASS_LOCK])


MEMORY_RESERVE_MB = 1024  # left to the host, dockerd and the worker itself


@dataclass
class _PoolView:
    read_at: float = -math.inf
    nodes: list[Node] = field(default_factory=list)


_view = _PoolView()


def pool_nodes(*, max_age_s: float = 0.0) -> list[Node]:
    """Every registered node; with `max_age_s`, as this process read them at most that long ago (unless none)."""
    now = time.monotonic()
    if not max_age_s or not _view.nodes or now - _view.read_at > max_age_s:
        _view.nodes, _view.read_at = list(Node.objects.all()), now
    return list(_view.nodes)  # a list of the caller's own: the view is this process's


def forget_pool_view() -> None:
    _view.read_at = -math.inf


@dataclass(frozen=True)
class ScratchSpace:
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
    """Register (or re-register) a node, each core and gpu lent once; a draining node stays draining. With
    `proving`, it takes only its probes until they pass; without `features`, it keeps the admin's."""
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
    """False when the node is unknown or offline."""
    fields: dict[str, object] = {"last_heartbeat": now}
    if scratch is not None:
        fields |= {"scratch_free_mb": scratch.free_mb, "scratch_min_free_mb": scratch.min_free_mb}
    return Node.objects.filter(name=name).exclude(state=Node.State.OFFLINE).update(**fields) == 1


def mark_lost_nodes(*, now: datetime, after: timedelta) -> list[Node]:
    """Mark offline (and return) the nodes silent for `after`, each claimed on the heartbeat it was seen with."""
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
    """An active node whose engine does not answer goes proving; True when it moved."""
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
    """Say why a proving node still takes no job (None: the reason it went proving with); True when it changed."""
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
    """Drain or resume a node, recording who, when and why. An offline node comes back only with its worker,
    and a resume never skips the isolation probes: one drained while proving resumes proving."""
    if state not in (Node.State.ACTIVE, Node.State.DRAINING):
        raise ValueError(f"a node is drained or resumed, not set to {state!r}")
    with transaction.atomic():
        hold_off_passes()
        locked = Node.objects.select_for_update().get(pk=node.pk)
        if locked.state == Node.State.OFFLINE:
            raise NodeOffline(f"node {node.name} is offline; it comes back when its worker starts again")
        if state == Node.State.ACTIVE and locked.state == Node.State.PROVING:
            raise NodeProving(f"node {node.name} is proving its isolation; it becomes active once its probes pass")
        if state == Node.State.ACTIVE and locked.state == Node.State.DRAINING:
            history = NodeStateChange.objects.filter(node=locked).order_by("-at", "-pk")
            if history.values_list("from_state", flat=True).first() == Node.State.PROVING:  # drained while proving
                state, reason = Node.State.PROVING, f"{reason or 'resumed by an operator'}: {PROBES_FIRST}"
        if locked.state != state:
            why = "drained" if state == Node.State.DRAINING else "resumed"
            _change_state(
                locked, state, now=now, by=acting_user, reason=(reason or f"{why} by an operator")[:REASON_MAX]
            )
    node.state, node.state_changed_at = locked.state, locked.state_changed_at
    node.state_changed_by, node.state_reason = locked.state_changed_by, locked.state_reason
    return node


def _change_state(node: Node, state: str, *, now: datetime, by: User | None, reason: str) -> None:
    NodeStateChange.objects.create(node=node, from_state=node.state, to_state=state, by=by, at=now, reason=reason)
    Node.objects.filter(pk=node.pk).update(state=state, state_changed_by=by, state_changed_at=now, state_reason=reason)
    node.state, node.state_changed_by, node.state_changed_at, node.state_reason = state, by, now, reason


def set_features(node: Node, features: list[str]) -> Node:
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
    """A job's constraint; BadConstraint naming the feature no registered node has."""
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
    if hold.released_at is not None:
        return hold
    hold.released_at = max(now, hold.held_at)
    hold.save(update_fields=["released_at"])
    HeldCore.objects.filter(hold=hold).delete()
    HeldGpu.objects.filter(hold=hold).delete()
    return hold
