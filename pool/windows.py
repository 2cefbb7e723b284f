"""Maintenance windows over time: at a window's start its nodes drain, at its end they resume by themselves.

Placement keeps jobs out of a window (pool.placement); this is the pool's side beat runs (jobs.tasks).
"""

from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet

from pool.models import REASON_MAX, MaintenanceWindow, Node, NodeStateChange
from pool.nodes import NodeOffline, set_state

# Teams see the windows starting within this much of now (and those under way) on the form and review page.
UPCOMING = timedelta(days=14)
DRAIN_PREFIX = "maintenance window: "
DRAINED_BY_A_WINDOW = Q(state=Node.State.DRAINING, state_changed_by__isnull=True, state_reason__startswith=DRAIN_PREFIX)


def drain_reason(window: MaintenanceWindow) -> str:
    """The reason a window's nodes drain with, in their history and on the operator panel."""
    return f"{DRAIN_PREFIX}{window.reason} until {window.ends_at:%Y-%m-%d %H:%M:%S} UTC"[:REASON_MAX]


def nodes_of(window: MaintenanceWindow) -> QuerySet[Node]:
    """The nodes the window is on: those it names, or every node when it names none."""
    named = window.nodes.all()
    return named if named.exists() else Node.objects.all()


@dataclass
class Turned:
    drained: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)


def turn(*, now: datetime) -> Turned:
    """Drain the nodes of the windows that have started and resume those of the windows that have ended, each
    once (drained_at, resumed_at) whatever passes race for it; one that ended before a pass saw it drains nothing."""
    turned = Turned()
    due_to_drain = MaintenanceWindow.objects.filter(starts_at__lte=now, ends_at__gt=now, drained_at__isnull=True)
    for window in due_to_drain:
        turned.drained += _drain(window, now=now)
    due_to_resume = MaintenanceWindow.objects.filter(ends_at__lte=now, resumed_at__isnull=True)
    for window in due_to_resume:
        turned.resumed += _resume(window, now=now)
    return turned


def _drain(window: MaintenanceWindow, *, now: datetime) -> list[str]:
    with transaction.atomic():
        # A pass that read the window under way may claim it only after a later pass saw it over: once
        # resumed (even having drained nothing), it must not drain, or its nodes would stay drained for good.
        unclaimed = MaintenanceWindow.objects.filter(pk=window.pk, drained_at__isnull=True, resumed_at__isnull=True)
        if unclaimed.update(drained_at=now) != 1:
            return []  # another pass claimed it, or it is over
        drained = []
        reason = drain_reason(window)
        for node in nodes_of(window).exclude(state__in=[Node.State.OFFLINE, Node.State.DRAINING]):
            with suppress(NodeOffline):  # lost meanwhile
                set_state(node, Node.State.DRAINING, now=now, reason=reason)
                drained.append(node.name)
    return drained


def _resume(window: MaintenanceWindow, *, now: datetime) -> list[str]:
    """Resume the window's nodes still drained by a window; one an operator drained meanwhile stays drained."""
    with transaction.atomic():
        # Locked and read again: a drain that committed after this pass read the window is seen here.
        claimed = MaintenanceWindow.objects.select_for_update().filter(pk=window.pk, resumed_at__isnull=True).first()
        if claimed is None:
            return []
        claimed.resumed_at = now
        claimed.save(update_fields=["resumed_at"])
        if claimed.drained_at is None:  # it ended before a pass saw it start: it drained nothing
            return []
        resumed = []
        reason = f"maintenance window over: {window.reason}"[:REASON_MAX]
        others = in_progress(now).exclude(pk=window.pk)
        for node in _drained_or_named(window, drained_at=claimed.drained_at).filter(DRAINED_BY_A_WINDOW):
            if others.filter(Q(nodes=node) | Q(nodes__isnull=True)).exists():
                continue  # another window on it is under way: it resumes when that one ends
            with suppress(NodeOffline):
                set_state(node, Node.State.ACTIVE, now=now, reason=reason)
                resumed.append(node.name)
    return resumed


def _drained_or_named(window: MaintenanceWindow, *, drained_at: datetime) -> QuerySet[Node]:
    """The nodes the window drained at its start, and those it names now: an operator may have narrowed it
    under way, and a node it no longer names must not stay drained for good."""
    drained = NodeStateChange.objects.filter(
        to_state=Node.State.DRAINING, at=drained_at, by__isnull=True, reason__startswith=DRAIN_PREFIX
    )
    return Node.objects.filter(Q(pk__in=nodes_of(window).values("pk")) | Q(pk__in=drained.values("node_id")))


def in_progress(now: datetime) -> QuerySet[MaintenanceWindow]:
    return MaintenanceWindow.objects.filter(starts_at__lte=now, ends_at__gt=now)


def upcoming(*, now: datetime, within: timedelta = UPCOMING) -> list[MaintenanceWindow]:
    found = MaintenanceWindow.objects.filter(ends_at__gt=now, starts_at__lte=now + within)
    return list(found.prefetch_related("nodes").order_by("starts_at", "pk"))


def kept_for_maintenance(*, now: datetime) -> Q:
    """The nodes draining for a window under way, which a pass reads with the nodes taking work, so a job waiting
    for them says it waits for the window (and when it can start after it)."""
    under_way = in_progress(now).filter(drained_at__isnull=False)
    on_it = under_way.filter(nodes=OuterRef("pk"))
    on_all = under_way.filter(nodes__isnull=True)
    return DRAINED_BY_A_WINDOW & (Exists(on_it) | Exists(on_all))
