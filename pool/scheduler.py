"""The scheduler: places waiting jobs on nodes, holding exact cores, memory and gpus."""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from accounting.fairshare import usage_now
from pool.holds import Placement, hold_many
from pool.models import Hold, Node
from pool.nodes import Free, free_capacity


@dataclass(frozen=True)
class Request:
    cpus: int
    memory_mb: int
    gpus: int


def fits(request: Request, free: Free) -> bool:
    return (
        len(free.cpu_ids) >= request.cpus and free.memory_mb >= request.memory_mb and len(free.gpu_ids) >= request.gpus
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def never_fits(request: Request, nodes: list[Node]) -> str | None:
    """Why no node of the pool could ever give this much, or None when one could."""
    if not nodes:
        return None  # an empty pool says nothing yet: nodes register when their workers start
    if any(fits(request, Free(n.cpu_ids, n.memory_mb, n.gpu_ids)) for n in nodes):
        return None
    return (
        f"needs {_plural(request.cpus, 'core')}, {request.memory_mb} MB, {_plural(request.gpus, 'gpu')}; "
        f"the largest node has {_plural(max(n.cpus for n in nodes), 'core')}, "
        f"{max(n.memory_mb for n in nodes)} MB, {_plural(max(n.gpus for n in nodes), 'gpu')}"
    )


def best_fit(request: Request, nodes: list[Node], free: dict[int, Free]) -> Node | None:
    """The node where the job leaves the fewest cores (then memory) idle."""
    candidates = [n for n in nodes if fits(request, free[n.pk])]
    if not candidates:
        return None
    return min(candidates, key=lambda n: (len(free[n.pk].cpu_ids), free[n.pk].memory_mb, n.name))


def waiting_jobs():
    from jobs.models import Job, Stage

    return Job.objects.filter(stage=Stage.SUBMIT, cancel_requested=False)


def team_usage(*, now: datetime) -> dict[int, float]:
    """Fair-share usage per team: decayed core-seconds of past holds, plus what its holds have
    accrued so far, so a team filling the pool right now also waits behind one that is not."""
    usage = usage_now(now=now)
    active = Hold.objects.filter(released_at__isnull=True).values_list("job__team_id", "cpu_set", "held_at")
    for team_id, cpu_set, held_at in active:
        usage[team_id] = usage.get(team_id, 0.0) + len(cpu_set) * max(0.0, (now - held_at).total_seconds())
    return usage


def queue(*, now: datetime) -> list[dict]:
    """The waiting jobs in the order they are served: the team's usage, then submit time."""
    usage = team_usage(now=now)
    rows = list(waiting_jobs().values("pk", "team_id", "submitted_at", "cpus", "memory_mb", "gpus"))
    rows.sort(key=lambda r: (usage.get(r["team_id"], 0.0), r["submitted_at"], str(r["pk"])))
    return rows


@transaction.atomic
def schedule(*, now: datetime | None = None, limit: int = 2000) -> list[Hold]:
    """One scheduler pass. Returns the holds it made.

    `now` defaults to the moment the node locks are taken (tests pass a fixed one).

    1. Lock every active node row (in name order, so concurrent passes queue up instead of
       deadlocking); the pass then owns the free capacity it computes.
    2. Reject the waiting jobs no registered node could ever hold.
    3. Walk the queue (fair-share order), placing each job on its best-fit node with the lowest free
       core ids; a job that does not fit yet is skipped, so a smaller one behind it may run (backfill).
    4. Lock the chosen job rows (skipping any a cancel holds) and hold them all in one go.
    """
    from jobs.models import Job

    nodes = list(Node.objects.select_for_update().filter(state=Node.State.ACTIVE).order_by("name"))
    # The meter starts when the locks are ours: read earlier, a pass that waited on a release would
    # date its holds before the cores it takes were free.
    now = now or timezone.now()
    waiting = queue(now=now)
    waiting = _reject_impossible(waiting, now=now)
    if not nodes or not waiting:
        return []
    free = free_capacity(nodes)
    chosen: dict[object, tuple[Node, list[int], list[str]]] = {}
    for row in waiting:
        request = Request(row["cpus"], row["memory_mb"], row["gpus"])
        node = best_fit(request, nodes, free)
        if node is None:
            continue
        room = free[node.pk]
        chosen[row["pk"]] = (node, room.cpu_ids[: request.cpus], room.gpu_ids[: request.gpus])
        free[node.pk] = Free(
            room.cpu_ids[request.cpus :], room.memory_mb - request.memory_mb, room.gpu_ids[request.gpus :]
        )
        if len(chosen) >= limit or not any(free[n.pk].cpu_ids for n in nodes):
            break
    lockable = Job.objects.select_for_update(skip_locked=True).filter(pk__in=list(chosen), stage="submit")
    jobs = {job.pk: job for job in lockable.only("pk", "memory_mb", "attempt")}
    return hold_many([Placement(jobs[pk], *chosen[pk]) for pk in chosen if pk in jobs], now=now)


def _reject_impossible(waiting: list[dict], *, now: datetime) -> list[dict]:
    """Reject jobs too big for every registered node (the pool shrank since they were submitted)."""
    from jobs.lifecycle import InvalidTransition, reject
    from jobs.models import Job

    all_nodes = list(Node.objects.all())
    verdicts: dict[tuple, str | None] = {}
    kept, impossible = [], []
    for row in waiting:
        shape = (row["cpus"], row["memory_mb"], row["gpus"])
        if shape not in verdicts:
            verdicts[shape] = never_fits(Request(*shape), all_nodes)
        (impossible if verdicts[shape] else kept).append(row)
    # In id order: two passes that rank teams differently must not lock the same rows crosswise.
    for row in sorted(impossible, key=lambda r: str(r["pk"])):
        shape = (row["cpus"], row["memory_mb"], row["gpus"])
        try:
            reject(Job.objects.get(pk=row["pk"]), reason=f"can never be held: {verdicts[shape]}", now=now)
        except InvalidTransition:
            pass
    return kept


@dataclass(frozen=True)
class Waiting:
    position: int  # 1 is next
    queued: int
    reason: str


def explain(job, *, now: datetime) -> Waiting | None:
    """Where a waiting job stands in the queue and why it is not held yet."""
    order = [row["pk"] for row in queue(now=now)]
    if job.pk not in order:
        return None
    position = order.index(job.pk) + 1
    request = Request(job.cpus, job.memory_mb, job.gpus)
    nodes = list(Node.objects.all())
    active = [n for n in nodes if n.state == Node.State.ACTIVE]
    if why := never_fits(request, nodes):
        reason = f"can never be held: {why}"
    elif not active:
        reason = "no node is accepting work (all are draining or offline)"
    else:
        free = free_capacity(active).values()
        if any(fits(request, f) for f in free):
            reason = f"{_plural(position - 1, 'job')} ahead in the queue" if position > 1 else "next to be held"
        else:
            reason = _shortfall(request, list(free))
    return Waiting(position=position, queued=len(order), reason=reason)


def _shortfall(request: Request, free: list[Free]) -> str:
    most_cores = max(len(f.cpu_ids) for f in free)
    most_memory = max(f.memory_mb for f in free)
    most_gpus = max(len(f.gpu_ids) for f in free)
    if request.cpus > most_cores:
        return f"needs {_plural(request.cpus, 'core')}; largest free: {most_cores}"
    if request.memory_mb > most_memory:
        return f"needs {request.memory_mb} MB; largest free: {most_memory} MB"
    if request.gpus > most_gpus:
        return f"needs {_plural(request.gpus, 'gpu')}; largest free: {most_gpus}"
    return "no single node has all of it free at once"
