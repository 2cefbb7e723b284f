"""The read side of a job's chain for its page: what it waits for and what waits for it, each with where it
stands, in a fixed number of queries however long the chain (jobs.lifecycle.chains decides when a dependency is met)."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, Model, Q

from jobs.lifecycle import array_state
from jobs.lifecycle.retries import attempts_of
from jobs.models import Dependency, Input, Job, JobArray, Outcome, Stage

# Where a job or a task is, in words: a stage while not released, its outcome once released.
WORDS = {
    Stage.SUBMIT: "waiting",
    Stage.RENT: "starting",
    Stage.RUN: "running",
    Stage.OUTPUT: "collecting outputs",
    **{value: str(label).lower() for value, label in Outcome.choices},
}
KIND_WORDS = {Dependency.Kind.OK: "after ok", Dependency.Kind.ANY: "after any", Dependency.Kind.NOT_OK: "after not ok"}


@dataclass
class Step:
    """A job or an array upstream or downstream of a job: how they are linked, and where it stands."""

    job: Job | None = None
    array: JobArray | None = None
    kinds: list[str] = field(default_factory=list)
    globs: list[str] = field(default_factory=list)  # the outputs of the upstream job read at /data/from/
    counts: dict[str, int] = field(default_factory=dict)  # an array's tasks by stage or outcome

    @property
    def node(self) -> Job | JobArray:
        return self.job if self.job is not None else self.array  # type: ignore[return-value]

    @property
    def kind_words(self) -> str:
        return ", ".join(KIND_WORDS[Dependency.Kind(kind)] for kind in self.kinds)

    @property
    def stage(self) -> str:
        if self.job is not None:
            return self.job.stage
        return array_state.stage_of(self.node, self.counts)  # type: ignore[arg-type]

    @property
    def outcome(self) -> str:
        """A job's outcome; an array's is `succeeded` once every task did, else the worst seen (once released)."""
        if self.job is not None:
            return self.job.outcome
        if self.stage != Stage.RELEASE:
            return ""
        return array_state.array_outcome(self.counts)

    @property
    def state(self) -> str:
        """Its outcome once released, else its stage."""
        return self.outcome or self.stage

    @property
    def state_words(self) -> str:
        return WORDS[self.state]

    @property
    def counts_shown(self) -> list[tuple[str, str, int]]:
        return counts_shown(self.counts)


def counts_shown(found: dict[str, int]) -> list[tuple[str, str, int]]:
    """An array's counts as (key, words, n), in the order its grid shows them."""
    return [(key, WORDS[key], found[key]) for key in array_state.SHOWN_FIRST if found.get(key)]


def array_counts(array_ids: Iterable[object]) -> dict[object, dict[str, int]]:
    """counts() of many arrays in one query."""
    ids = set(array_ids)
    found: dict[object, dict[str, int]] = {pk: {} for pk in ids}
    if not ids:
        return found
    rows = Job.objects.filter(array_id__in=ids).order_by().values_list("array_id", "stage", "outcome")
    for array_id, stage, outcome, n in rows.annotate(n=Count("pk")):
        key = outcome if stage == Stage.RELEASE else stage
        found[array_id][key] = found[array_id].get(key, 0) + n
    return found


def _steps(dependencies: Q, reads: Q, *, ends: tuple[str, str], readers: tuple[str, ...]) -> list[Step]:
    """The jobs and arrays at the `ends` of the matching Dependency rows and the `readers` of the matching
    Input rows, each once, with its kinds, globs and (an array's) counts; 3 queries."""
    steps: dict[tuple[str, object], Step] = {}

    def merged(job: Job | None, array: JobArray | None = None) -> Step:
        key = ("job", job.pk) if job is not None else ("array", array.pk)  # type: ignore[union-attr]
        return steps.setdefault(key, Step(job=job, array=array))

    for row in Dependency.objects.filter(dependencies).select_related(*ends).order_by("pk"):
        step = merged(*(getattr(row, end) for end in ends))
        if row.kind not in step.kinds:
            step.kinds.append(row.kind)
    for read in Input.objects.filter(reads).select_related(*readers).order_by("pk"):
        merged(*(getattr(read, reader) for reader in readers)).globs.append(read.glob)
    found = array_counts(step.array.pk for step in steps.values() if step.array is not None)
    for step in steps.values():
        if step.array is not None:
            step.counts = found[step.array.pk]
    return list(steps.values())


def upstream_of(job: Job) -> list[Step]:
    """What it waits for (its own dependencies and its array's), with the outputs it reads of each."""
    own = Q(job=job) | Q(array_id=job.array_id) if job.array_id is not None else Q(job=job)
    return _steps(own, own, ends=("on_job", "on_array"), readers=("from_job",))


def downstream_of(job: Job) -> list[Step]:
    """What waits for it (or for its array), and what reads its outputs."""
    on = Q(on_job=job) | Q(on_array_id=job.array_id) if job.array_id is not None else Q(on_job=job)
    return _steps(on, Q(from_job=job), ends=("job", "array"), readers=("job", "array"))


def array_upstream(array: JobArray) -> list[Step]:
    own = Q(array=array)
    return _steps(own, own, ends=("on_job", "on_array"), readers=("from_job",))


def array_downstream(array: JobArray) -> list[Step]:
    return _steps(Q(on_array=array), Q(from_job__array=array), ends=("job", "array"), readers=("job", "array"))


@dataclass
class Attempt:
    """One attempt of a retried job as its page's table shows it."""

    attempt: int
    state: str  # its outcome once it ended, else the job's stage
    exit_code: int | None
    reason: str
    memory_mb: int | None
    held_at: datetime | None
    released_at: datetime | None
    current: bool = False

    @property
    def state_words(self) -> str:
        return WORDS.get(self.state, self.state)


def _moment(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def attempts_shown(job: Job) -> list[Attempt]:
    """Its attempts as jobs.lifecycle.retries keeps them (the past ones as each ended, then this one), with moments."""
    rows = attempts_of(job)
    return [
        Attempt(
            attempt=row["attempt"],
            # The current attempt not ended yet has no outcome: where it is instead.
            state=row["outcome"] or job.stage,
            exit_code=row["exit_code"],
            reason=row["reason"] or "",
            memory_mb=row["memory_mb"],
            held_at=_moment(row["held_at"]),
            released_at=_moment(row["released_at"]),
            current=n == len(rows),
        )
        for n, row in enumerate(rows, start=1)
    ]


def made_by(owner: Job | JobArray) -> Model | None:
    """The schedule's run that submitted the job (or the array it is a task of), with its schedule; None when a
    person did. Read through the reverse relation the schedules app declares, so jobs imports nothing above it."""
    if isinstance(owner, Job) and owner.array_id is not None:
        owner = owner.array  # type: ignore[assignment]  # a task's array is never None with an array_id
    found: Model | None = owner.schedule_runs.select_related("schedule").order_by("-planned_at").first()
    return found
