"""What follows a release (dependents let go or doomed, an array's next tasks let go, an array stopped): a release
writes a Settle row in its transaction, and the next pass `settle`s them, so none is lost to a broker down."""

import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, Q

from jobs.lifecycle.array_state import FAILED
from jobs.models import Dependency, Job, JobArray, Outcome, Settle, Stage
from jobs.signals import array_released

BATCH = 1000  # Settle rows one pass reads at most; the rest wait for the next
KIND_WORDS = {
    Dependency.Kind.OK: "to succeed",
    Dependency.Kind.ANY: "to end",
    Dependency.Kind.NOT_OK: "to end without succeeding",
}
OPTION = {Dependency.Kind.OK: "after_ok", Dependency.Kind.ANY: "after_any", Dependency.Kind.NOT_OK: "after_not_ok"}


def touch(job: Job) -> bool:
    """In a release's transaction: the next pass settles what follows it, when anything does (True)."""
    if job.array_id is not None:
        Settle.objects.create(job=job, array_id=job.array_id)
    elif Dependency.objects.filter(on_job=job).exists():
        Settle.objects.create(job=job)
    else:
        return False
    return True


def touch_array(array: JobArray) -> None:
    Settle.objects.create(array=array)


def touch_upstream(dependencies: list[Dependency]) -> None:
    """At submit: the next pass looks at the upstream again, so one released meanwhile is not missed."""
    Settle.objects.bulk_create(Settle(job_id=d.on_job_id, array_id=d.on_array_id) for d in dependencies)


def held_back_words(dependencies: list[Dependency]) -> str:
    """A held-back job's wait_reason: what it waits for."""
    parts = [f"{_name(d)} {KIND_WORDS[Dependency.Kind(d.kind)]}" for d in dependencies]
    return ("waits for " + ", and ".join(parts))[:300]


def max_running_words(array: JobArray) -> str:
    return f"held back: array {array.pk} lets at most {array.max_running} tasks hold compute at once"


def _name(dependency: Dependency) -> str:
    return f"job {dependency.on_job_id}" if dependency.on_job_id else f"array {dependency.on_array_id}"


@dataclass
class Settled:
    """What a pass's settling leaves to jobs.lifecycle.actions: the doomed dependents and the arrays to stop."""

    doomed_jobs: list[tuple[uuid.UUID, str]] = field(default_factory=list)
    stopped_arrays: list[tuple[JobArray, str]] = field(default_factory=list)
    let_go: int = 0


def settle(*, now: datetime) -> Settled:
    """Take the Settle rows (a concurrent pass skips them); settle each array touched and decide every dependent."""
    rows = list(Settle.objects.select_for_update(skip_locked=True).values_list("pk", "job_id", "array_id")[:BATCH])
    Settle.objects.filter(pk__in=[pk for pk, _, _ in rows]).delete()
    settled = Settled()
    if not rows:
        return settled
    job_ids = {job_id for _, job_id, _ in rows if job_id}
    array_ids = {array_id for _, _, array_id in rows if array_id}
    # Arrays a task failed in this batch: their stop rule is counted, their after_ok dependents doomed.
    failed_in = set(
        Job.objects.ended()
        .filter(pk__in=job_ids, array__isnull=False, outcome__in=FAILED)
        .values_list("array_id", flat=True)
    )
    for array in JobArray.objects.select_for_update().filter(pk__in=array_ids).order_by("pk"):
        _settle_array(array, failed=array.pk in failed_in, settled=settled, now=now)
    _decide_dependents(job_ids, array_ids, failed_in, settled)
    return settled


def _settle_array(array: JobArray, *, failed: bool, settled: Settled, now: datetime) -> None:
    live = array.released_at is None and array.stopped_at is None
    if live and failed and array.stop_after_failures is not None:
        failures = Job.objects.ended().filter(array=array, outcome__in=FAILED).count()
        if failures >= array.stop_after_failures:
            why = f"{failures} tasks failed (stop_after_failures={array.stop_after_failures})"
            settled.stopped_arrays.append((array, why))
            live = False
    if live and not array.waiting_on_dependencies:
        settled.let_go += let_go_tasks(array)
    if array.released_at is None and not Job.objects.live().filter(array=array).exists():
        JobArray.objects.filter(pk=array.pk).update(released_at=now)
        array.released_at = now
        array_released.send(sender=JobArray, array=array, at=now)


def let_go_tasks(array: JobArray) -> int:
    """Let the array's next held-back tasks (in index order) into the queue, as many as its max_running has room for."""
    held_back = Job.objects.waiting().filter(array=array, held_back=True)
    if array.max_running is None:
        return held_back.update(held_back=False, wait_reason="")
    let_go = Job.objects.live().filter(array=array, held_back=False).count()
    room = array.max_running - let_go
    if room <= 0:
        return 0
    next_ids = list(held_back.order_by("array_index").values_list("pk", flat=True)[:room])
    return Job.objects.waiting().filter(pk__in=next_ids).update(held_back=False, wait_reason="")


def _decide_dependents(job_ids: set[uuid.UUID], array_ids: set[uuid.UUID], failed_in: set, settled: Settled) -> None:
    touched = Q(on_job__in=job_ids) | Q(on_array__in=array_ids)
    waiting = Dependency.objects.filter(touched, job__stage=Stage.SUBMIT, job__held_back=True)
    waiting_jobs = set(waiting.values_list("job_id", flat=True))
    waiting_arrays = set(
        Dependency.objects.filter(
            touched, array__waiting_on_dependencies=True, array__stopped_at__isnull=True
        ).values_list("array_id", flat=True)
    )
    if not waiting_jobs and not waiting_arrays:
        return
    every = list(Dependency.objects.filter(Q(job__in=waiting_jobs) | Q(array__in=waiting_arrays)))
    states = _upstream_states(every, failed_in)
    by_dependent: dict[tuple[str, uuid.UUID], list[Dependency]] = defaultdict(list)
    for d in every:
        of = d.job_id or d.array_id
        assert of is not None  # the constraint dependency_of_one
        by_dependent[("job" if d.job_id else "array", of)].append(d)
    arrays = JobArray.objects.in_bulk([pk for kind, pk in by_dependent if kind == "array"])
    for (kind, pk), dependencies in sorted(by_dependent.items(), key=lambda item: str(item[0][1])):
        verdicts = [(d, _verdict(d, states[d.upstream_id])) for d in dependencies]
        never = [f"{_name(d)} {why} ({OPTION[Dependency.Kind(d.kind)]})" for d, (met, why) in verdicts if met is False]
        if never:
            reason = f"its dependency can never be met: {'; '.join(never)}"
            if kind == "job":
                settled.doomed_jobs.append((pk, reason))
            else:
                settled.stopped_arrays.append((arrays[pk], reason))
        elif all(met for _, (met, _) in verdicts):
            if kind == "job":
                settled.let_go += Job.objects.waiting().filter(pk=pk).update(held_back=False, wait_reason="")
            else:
                array = arrays[pk]
                JobArray.objects.filter(pk=pk).update(waiting_on_dependencies=False)
                array.waiting_on_dependencies = False
                if array.max_running is not None:
                    Job.objects.filter(array=array, held_back=True).update(wait_reason=max_running_words(array))
                settled.let_go += let_go_tasks(array)


@dataclass(frozen=True)
class State:
    """An upstream as a dependency sees it: ended or not, succeeded or not (an array: every task)."""

    ended: bool
    succeeded: bool
    how_it_ended: str  # how it ended, for a doomed dependent's reason


def _upstream_states(dependencies: list[Dependency], failed_in: set) -> dict[uuid.UUID, State]:
    states: dict[uuid.UUID, State] = {}
    job_ids = {d.on_job_id for d in dependencies if d.on_job_id}
    for pk, stage, outcome in Job.objects.filter(pk__in=job_ids).values_list("pk", "stage", "outcome"):
        ended = stage == Stage.RELEASE
        states[pk] = State(ended, ended and outcome == Outcome.SUCCEEDED, f"ended {outcome}" if ended else "")
    for array_id in {d.on_array_id for d in dependencies if d.on_array_id}:
        states[array_id] = _array_state(array_id, failed=array_id in failed_in)
    return states


def _array_state(array_id: uuid.UUID, *, failed: bool) -> State:
    """An array has ended once every task is released; a task failed in this batch already says it did not succeed."""
    tasks = Job.objects.filter(array_id=array_id)
    if tasks.live().exists():
        return State(False, False, "has a task that did not succeed" if failed else "")
    outcomes = dict(tasks.order_by().values_list("outcome").annotate(n=Count("pk")).values_list("outcome", "n"))
    others = {outcome: n for outcome, n in outcomes.items() if outcome != Outcome.SUCCEEDED}
    words = ", ".join(f"{n} {outcome}" for outcome, n in sorted(others.items()))
    return State(True, not others, f"ended with {words}" if others else "ended")


def _verdict(dependency: Dependency, state: State) -> tuple[bool | None, str]:
    """(True: met, False: never met, None: not yet), and the words of a never."""
    kind = dependency.kind
    if kind == Dependency.Kind.OK:
        if state.ended:
            return state.succeeded, state.how_it_ended
        # An array's failed task dooms it at once.
        return (False, state.how_it_ended) if state.how_it_ended else (None, "")
    if not state.ended:
        return None, ""
    if kind == Dependency.Kind.ANY:
        return True, ""
    return (False, "succeeded") if state.succeeded else (True, "")
