"""Why a job waits: the reason a pass decides (a code and its numbers, no words) and its words, made where they
are shown (the job's page, the API, the queue's stored reason), times in the site's zone."""

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from django.conf import settings
from django.utils import timezone

from core.formats import count as plural
from pool.features import named

SCRATCH_NODES_NAMED = 3


class WaitCode(StrEnum):
    """Why a job waits; each code's numbers are named beside it."""

    NO_NODE = "no_node"  # no node is accepting work
    SHORT_OF_SCRATCH = "short_of_scratch"  # every accepting node is short of scratch space
    RESERVED = "reserved"  # node, start; cpus, memory_mb, gpus: what the node must free first
    RESERVED_AFTER = "reserved_after"  # node, start: it starts when a reserved job ahead ends
    NEEDS_CORES = "needs_cores"  # needs, largest_free
    NEEDS_MEMORY = "needs_memory"  # needs, largest_free (MB)
    NEEDS_GPUS = "needs_gpus"  # needs, largest_free
    NOT_AT_ONCE = "not_at_once"  # no single node has all of it free at once
    BEHIND_RESERVATION = "behind_reservation"  # starting now would delay a reserved job ahead
    IN_LINE = "in_line"  # it fits: only the jobs ahead in the queue go first
    NEVER_FITS = "never_fits"  # cpus, memory_mb, gpus; largest_cpus, largest_memory_mb, largest_gpus
    PROVING = "proving"  # node: the nodes with room take no team's job until their isolation probes pass
    QUEUE_LIMIT = "queue_limit"  # detail: the queue; cores (and the job's cpus) or jobs: the team's cap there
    MISSING_FEATURE = "missing_feature"  # detail: the features no node taking work has (comma-separated)
    NO_FEATURE = "no_feature"  # detail: the features no registered node has: it can never be held
    MAINTENANCE = "maintenance"  # detail: the window's reason; start: when it starts; expected start after it


@dataclass(frozen=True)
class ShortOfScratch:
    node: str
    free_mb: int | None  # never None on a node short of it (pool.models.Node.short_of_scratch)
    keeps_mb: int


@dataclass(frozen=True)
class Reason:
    """Why a job waits, with no words: they are made where they are shown (reason_text)."""

    code: WaitCode
    numbers: Mapping[str, int] = field(default_factory=dict)
    ahead: int = 0  # jobs ahead of it in the queue
    node: str = ""  # the node reserved on
    start: datetime | None = None  # when the reservation starts
    short_of_scratch: tuple[ShortOfScratch, ...] = ()  # nodes left out for want of scratch space
    detail: str = ""  # a queue, features or a window's reason, as the code says


def reason_text(reason: Reason, *, now: datetime | None = None) -> str:
    """E.g. "needs 8 cores; largest free: 4; 2 jobs ahead in the queue"."""
    n = reason.numbers
    match reason.code:
        case WaitCode.NO_NODE:
            return "no node is accepting work (all are draining or offline)"
        case WaitCode.SHORT_OF_SCRATCH:
            return scratch_shortage(reason.short_of_scratch)
        case WaitCode.PROVING:
            return f"no node takes a team's job yet: {reason.node} must pass its isolation probes first"
        case WaitCode.RESERVED | WaitCode.RESERVED_AFTER:
            assert reason.start is not None and now is not None
            by = f"reserved: expected to start by {clock(reason.start, now=now)}"
            if reason.code == WaitCode.RESERVED_AFTER:
                return f"{by} on {reason.node}, after a reserved job ahead"
            frees = [plural(n["cpus"], "core") if n["cpus"] else "", f"{n['memory_mb']} MB" if n["memory_mb"] else ""]
            frees.append(plural(n["gpus"], "gpu") if n["gpus"] else "")
            return f"{by} when {reason.node} frees {' and '.join(part for part in frees if part)}"
        case WaitCode.NO_FEATURE:
            return f"no node of the pool has {named(reason.detail.split(','))} it asks for"
        case WaitCode.MAINTENANCE:
            assert reason.start is not None and now is not None
            return (
                f"its time limit would run into the maintenance window from {clock(reason.start, now=now, by=False)} "
                f"({reason.detail}): it waits for the window to end"
            )
        case WaitCode.NEVER_FITS:
            return (
                f"needs {plural(n['cpus'], 'core')}, {n['memory_mb']} MB, {plural(n['gpus'], 'gpu')}; "
                f"the largest node has {plural(n['largest_cpus'], 'core')}, {n['largest_memory_mb']} MB, "
                f"{plural(n['largest_gpus'], 'gpu')}"
            )
    why = _shortfall(reason)
    if why and reason.short_of_scratch:
        why = f"{why} ({scratch_shortage(reason.short_of_scratch)})"
    ahead = f"{plural(reason.ahead, 'job')} ahead in the queue" if reason.ahead else ""
    return "; ".join(part for part in (why, ahead) if part) or "next to be held"


def waiting_for_preempted(victims: Sequence[uuid.UUID]) -> str:
    """E.g. "waits for the job it preempted to stop (grace time 30s): 1b2c3d4e-…"."""
    jobs = "the job" if len(victims) == 1 else f"the {len(victims)} jobs"
    named = ", ".join(str(v) for v in sorted(victims, key=str))
    return f"waits for {jobs} it preempted to stop (grace time {settings.E31_PREEMPT_GRACE_S}s): {named}"


def _shortfall(reason: Reason) -> str:
    """What keeps a job with no reservation from starting now; "" when only the queue does."""
    n = reason.numbers
    match reason.code:
        case WaitCode.NEEDS_CORES:
            return f"needs {plural(n['needs'], 'core')}; largest free: {n['largest_free']}"
        case WaitCode.NEEDS_MEMORY:
            return f"needs {n['needs']} MB; largest free: {n['largest_free']} MB"
        case WaitCode.NEEDS_GPUS:
            return f"needs {plural(n['needs'], 'gpu')}; largest free: {n['largest_free']}"
        case WaitCode.NOT_AT_ONCE:
            return "no single node has all of it free at once"
        case WaitCode.BEHIND_RESERVATION:
            return "starting now would delay a reserved job ahead"
        case WaitCode.MISSING_FEATURE:
            return f"no node taking work has {named(reason.detail.split(','))} it asks for"
        case WaitCode.QUEUE_LIMIT:
            if "jobs" in n:
                return f"its team runs {plural(n['in_use'], 'job')} in queue {reason.detail}, its limit of {n['jobs']}"
            if n.get("cpus", 0) > n["cores"]:  # a cap lowered since it was submitted: its team's jobs ending won't do
                said = f"more than queue {reason.detail} lets a team hold at once ({n['cores']})"
                return f"it asks for {plural(n['cpus'], 'core')}, {said}"
            return f"its team holds {plural(n['in_use'], 'core')} in queue {reason.detail}, its limit is {n['cores']}"
    return ""


def scratch_shortage(nodes: tuple[ShortOfScratch, ...]) -> str:
    """E.g. "n1 is short of scratch space: 800 MB free, keeps 1024 MB"."""
    named = [f"{s.node} is short of scratch space: {s.free_mb} MB free, keeps {s.keeps_mb} MB" for s in nodes]
    more = len(nodes) - SCRATCH_NODES_NAMED
    return "; ".join(named[:SCRATCH_NODES_NAMED]) + (f" and {plural(more, 'node')} more" if more > 0 else "")


def clock(moment: datetime, *, now: datetime, by: bool = True) -> str:
    """The minute by which `moment` has come (`by`; else the minute it falls in: a window starting at 22:00:30
    is under way "from 22:00"), in the site's zone; with the date when not today."""
    local = timezone.localtime(moment)
    if by and (local.second or local.microsecond):
        local = local.replace(second=0, microsecond=0) + timedelta(minutes=1)
    today = local.date() == timezone.localtime(now).date()
    return local.strftime("%H:%M %Z" if today else "%Y-%m-%d %H:%M %Z")
