"""The morning review: what ended since a time (failures first), counts by outcome, what runs and waits now.
An array is one row with its counts, and jobs linked by dependencies one pipeline with the step it broke at."""

import uuid
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta, tzinfo
from decimal import Decimal
from typing import cast

from django.db.models import (
    Case,
    Count,
    DecimalField,
    Exists,
    ExpressionWrapper,
    F,
    IntegerField,
    Max,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from accounting.models import Record
from accounting.rates import MONEY, core_hours, currency
from core.when import EARLIEST
from jobs.models import HELD_STAGES, Dependency, Job, JobArray, Outcome, OutputFile, Stage
from jobs.web.figures import Figures, figures
from jobs.web.pipelines import Step

# The run did not do its work; a cancel was someone's choice.
FAILURES = [Outcome.FAILED, Outcome.TIMED_OUT, Outcome.OUT_OF_MEMORY, Outcome.NODE_LOST, Outcome.REJECTED]
WINDOWS = [("24 h", timedelta(days=1)), ("7 d", timedelta(days=7)), ("30 d", timedelta(days=30))]


def default_since(now: datetime, zone: tzinfo) -> datetime:
    """18:00 the day before, in the team's time zone: "what happened overnight"."""
    day = now.astimezone(zone).date() - timedelta(days=1)
    return datetime.combine(day, time(18), tzinfo=zone)


def with_figures(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """Jobs with their outputs' count and size and their records, in a fixed number of queries."""
    outputs = OutputFile.objects.filter(job=OuterRef("pk")).order_by().values("job")
    return (
        jobs.select_related("image", "submitted_by", "team", "cancelled_by")
        .annotate(
            outputs_count=Coalesce(Subquery(outputs.annotate(n=Count("pk")).values("n")), Value(0)),
            outputs_size=Coalesce(Subquery(outputs.annotate(s=Sum("size")).values("s")), Value(0)),
        )
        .prefetch_related(Prefetch("records", queryset=Record.objects.order_by("sequence"), to_attr="record_list"))
    )


def released(jobs: QuerySet[Job], *, since: datetime, until: datetime | None = None) -> QuerySet[Job]:
    found = jobs.filter(stage=Stage.RELEASE, released_at__gte=since)
    return found if until is None else found.filter(released_at__lt=until)


def alone(jobs: QuerySet[Job], *, since: datetime, until: datetime | None = None) -> QuerySet[Job]:
    """The jobs released in [since, until) that are in no array or pipeline (each shown as one row)."""
    linked = Exists(Dependency.objects.filter(job=OuterRef("pk"))) | Exists(
        Dependency.objects.filter(on_job=OuterRef("pk"))
    )
    return released(jobs, since=since, until=until).filter(array__isnull=True).exclude(linked)


OPEN_FAILURE, FIXED_FAILURE, NOT_FAILED = 0, 1, 2  # the ranks of `ended`'s order (its `failed_first`)


def ended(jobs: QuerySet[Job], *, since: datetime, until: datetime | None = None) -> QuerySet[Job]:
    """The jobs alone released in [since, until): open failures, those fixed (`fixer_id`, `fixer_name`), the rest."""
    # A failure is fixed when a resubmission of it succeeded: the first one is named.
    fixed_by = jobs.filter(stage=Stage.RELEASE, outcome=Outcome.SUCCEEDED, resubmitted_from=OuterRef("pk"))
    first = fixed_by.order_by("released_at", "pk")
    fixer = {"fixer_id": Subquery(first.values("pk")[:1]), "fixer_name": Subquery(first.values("name")[:1])}
    failed_first = Case(
        When(outcome__in=FAILURES, fixer_id__isnull=True, then=Value(OPEN_FAILURE)),
        When(outcome__in=FAILURES, then=Value(FIXED_FAILURE)),
        default=Value(NOT_FAILED),
        output_field=IntegerField(),
    )
    return (
        with_figures(alone(jobs, since=since, until=until))
        .annotate(**fixer)
        .annotate(failed_first=failed_first)
        .order_by("failed_first", "-released_at", "pk")
    )


def advised_once(shown: list[tuple[Job, Figures]]) -> set[uuid.UUID]:
    """Per job name, its newest run shown when it asked for more than it used: the advice is the name's."""
    newest: dict[tuple[int, str], tuple[Job, Figures]] = {}
    for job, f in shown:
        key = (job.team_id, job.name)
        if key not in newest or (job.released_at, str(job.pk)) > (newest[key][0].released_at, str(newest[key][0].pk)):
            newest[key] = (job, f)
    return {job.pk for job, f in newest.values() if f.over_asked}


@dataclass(frozen=True)
class Ended:
    """A job of the review's list: a card when it failed, one line otherwise."""

    job: Job
    figures: Figures
    advise: bool = False  # say its smaller request here (advised_once)

    @property
    def failure(self) -> bool:
        return self.job.failed_first != NOT_FAILED  # type: ignore[attr-defined]

    @property
    def fixed(self) -> bool:
        return self.failure and self.job.fixer_id is not None  # type: ignore[attr-defined]


def rows_of(shown: list[Job]) -> list[Ended]:
    found = [(job, figures(job)) for job in shown]
    advised = advised_once(found)
    return [Ended(job, f, job.pk in advised) for job, f in found]


@dataclass(frozen=True)
class OutcomeCount:
    outcome: str
    label: str
    count: int
    before: int  # in the window before, of the same length

    @property
    def change(self) -> str:
        """The count against the window before: "+1", "-2", "±0"."""
        n = self.count - self.before
        return f"+{n}" if n > 0 else f"{n}" if n < 0 else "±0"


@dataclass(frozen=True)
class Summary:
    """The window summed: the jobs ended by outcome against the window before, its cost and core-hours."""

    outcomes: list[OutcomeCount]
    total: int
    cost: Decimal
    core_hours_held: Decimal
    core_hours_used: Decimal

    @property
    def cost_exact(self) -> str:
        return f"{self.cost.quantize(MONEY):f} {currency()}"


def summary(jobs: QuerySet[Job], *, since: datetime, until: datetime | None, now: datetime) -> Summary:
    """The window [since, until or now) summed against the one as long before it, tasks too, in one query."""
    end = until or now
    try:
        before = max(since - (end - since), EARLIEST)
    except OverflowError:  # a window from the calendar's first years has none as long before it
        before = EARLIEST
    in_window = Q(released_at__gte=since)
    held = ExpressionWrapper(F("records__held_seconds") * F("records__cpus"), output_field=DecimalField())
    # One query: the jobs of both windows by outcome, joined to their records (a job counted once however many
    # attempts it had) for the cost and the core-seconds of the window's.
    grouped = (
        released(jobs, since=before, until=end)
        .order_by()
        .values("outcome")
        .annotate(
            now=Count("pk", filter=in_window, distinct=True),
            before=Count("pk", filter=~in_window, distinct=True),
            cost=Sum("records__cost", filter=in_window),
            held=Sum(held, filter=in_window),
            used=Sum("records__cpu_seconds", filter=in_window),
        )
    )
    rows = list(grouped)
    counted = {row["outcome"]: (row["now"], row["before"]) for row in rows}
    outcomes = [
        OutcomeCount(outcome, str(label).lower(), *counted[outcome])
        for outcome, label in Outcome.choices
        if any(counted.get(outcome, ()))
    ]

    def total(key: str) -> Decimal:
        return sum((row[key] for row in rows if row[key] is not None), Decimal(0))

    return Summary(
        outcomes=outcomes,
        total=sum(row.count for row in outcomes),
        cost=total("cost"),
        core_hours_held=core_hours(total("held")),
        core_hours_used=core_hours(total("used")),
    )


def outcome_counts(jobs: QuerySet[Job], *, now: datetime) -> list[dict]:
    longest = max(span for _, span in WINDOWS)
    windows = {f"n{i}": Count("pk", filter=Q(released_at__gte=now - span)) for i, (_, span) in enumerate(WINDOWS)}
    grouped = (
        jobs.filter(stage=Stage.RELEASE, released_at__gte=now - longest)
        .order_by()
        .values("outcome")
        .annotate(**windows)
    )
    counted = {row["outcome"]: [row[f"n{i}"] for i in range(len(WINDOWS))] for row in grouped}
    rows = [
        {"outcome": outcome, "label": label, "counts": counted.get(outcome, [0] * len(WINDOWS))}
        for outcome, label in Outcome.choices
    ]
    totals = [sum(row["counts"][i] for row in rows) for i in range(len(WINDOWS))]
    return [*rows, {"outcome": "", "label": "all", "counts": totals}]


def running(jobs: QuerySet[Job]) -> QuerySet[Job]:
    running = jobs.filter(stage__in=HELD_STAGES, array__isnull=True)
    return running.select_related("image", "submitted_by").order_by("held_at", "pk")


def waiting(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """Waiting jobs in queue order (those the scheduler has not placed yet last); not the tasks of an array."""
    return (
        jobs.filter(stage=Stage.SUBMIT, array__isnull=True)
        .select_related("image", "submitted_by")
        .order_by("queue_position", "submitted_at", "pk")
    )


def progress(job: Job, now: datetime) -> tuple[int, int]:
    if job.started_at is None:
        return 0, job.time_limit_s
    return min(int((now - job.started_at).total_seconds()), job.time_limit_s), job.time_limit_s


# --- arrays and pipelines -----------------------------------------------------------------------------


@dataclass
class ArrayRow(Step):
    by: str = ""
    last_ended: datetime | None = None  # of its tasks released in the window read, if one was
    ended_in_window: int = 0

    @property
    def failed(self) -> bool:
        return self.outcome not in ("", Outcome.SUCCEEDED) or any(self.counts.get(o) for o in FAILURES)

    @property
    def running(self) -> int:
        return sum(self.counts.get(stage, 0) for stage in HELD_STAGES)

    @property
    def waiting(self) -> int:
        return self.counts.get(Stage.SUBMIT, 0)


def live_arrays(jobs: QuerySet[Job]) -> Q:
    return Q(array_id__in=jobs.filter(array__isnull=False).exclude(stage=Stage.RELEASE).values("array_id"))


def array_rows(tasks: Q, window: Q | None = None) -> dict[uuid.UUID, ArrayRow]:
    """Every array with a task among `tasks`, its counts and those released in `window`. The ids are read first:
    as a subquery, PostgreSQL guesses thousands of them and scans every job of every team."""
    window = window if window is not None else Q(released_at__isnull=False)
    array_ids = set(Job.objects.filter(tasks).order_by().values_list("array_id", flat=True).distinct())
    if not array_ids:
        return {}
    columns = ["array_id", "array__name", "array__size", "array__submitted_at", "array__submitted_by__username"]
    rows = (
        Job.objects.filter(array_id__in=array_ids)
        .order_by()
        .values_list(*columns, "stage", "outcome")
        .annotate(n=Count("pk"), in_window=Count("pk", filter=window), last=Max("released_at", filter=window))
    )
    found: dict[uuid.UUID, ArrayRow] = {}
    for array_id, name, size, submitted_at, by, stage, outcome, n, in_window, last in rows:
        array = JobArray(id=array_id, name=name, size=size, submitted_at=submitted_at)
        row = found.setdefault(array_id, ArrayRow(array=array, by=by))
        key = outcome if stage == Stage.RELEASE else stage
        row.counts[key] = row.counts.get(key, 0) + n
        row.ended_in_window += in_window
        if last is not None and (row.last_ended is None or last > row.last_ended):
            row.last_ended = last
    return found


@dataclass
class Pipeline:
    """Jobs and arrays linked by dependencies, upstream first, and where the chain broke."""

    steps: list[Step]
    broken: Step | None = None  # the first that ended without succeeding
    cancelled_after: list[Step] = field(default_factory=list)  # what was cancelled downstream of it
    at: Step | None = None  # while none broke: the first not released yet

    @property
    def last_ended(self) -> datetime | None:
        ends = [step.job.released_at if step.job else getattr(step, "last_ended", None) for step in self.steps]
        return max((end for end in ends if end is not None), default=None)


def _key(node: Job | JobArray) -> tuple[str, uuid.UUID]:
    return ("job" if isinstance(node, Job) else "array", node.pk)


def _ordered(nodes: dict[tuple[str, uuid.UUID], Step], edges: list[tuple]) -> list[Step]:
    """Upstream first (Kahn's order), the earlier submitted first among the ready."""
    below: dict[tuple, set[tuple]] = {key: set() for key in nodes}
    waits = dict.fromkeys(nodes, 0)
    for up, down in set(edges):
        below[up].add(down)
        waits[down] += 1
    submitted = {key: (step.node.submitted_at, step.node.name) for key, step in nodes.items()}
    ready = sorted((key for key, n in waits.items() if not n), key=lambda key: submitted[key])
    order: list[tuple] = []
    while ready:
        key = ready.pop(0)
        order.append(key)
        for down in below[key]:
            waits[down] -= 1
            if not waits[down]:
                ready.append(down)
        ready.sort(key=lambda key: submitted[key])
    order += [key for key in nodes if key not in order]  # a cycle, which submission refuses: shown as is
    return [nodes[key] for key in order]


def _where_it_broke(pipeline: Pipeline, below: dict[tuple, set[tuple]]) -> Pipeline:
    for step in pipeline.steps:
        if step.outcome and step.outcome != Outcome.SUCCEEDED:
            pipeline.broken = step
            break
    if pipeline.broken is None:
        pipeline.at = next((step for step in pipeline.steps if step.stage != Stage.RELEASE), None)
        return pipeline
    after, todo = set(), [_key(pipeline.broken.node)]
    while todo:
        for down in below.get(todo.pop(), ()):
            if down not in after:
                after.add(down)
                todo.append(down)
    pipeline.cancelled_after = [
        step for step in pipeline.steps if _key(step.node) in after and step.outcome == Outcome.CANCELLED
    ]
    return pipeline


def pipelines_of(
    jobs: QuerySet[Job], *, since: datetime, until: datetime | None = None, with_live: bool = True
) -> tuple[list[Pipeline], list[ArrayRow], dict[uuid.UUID, ArrayRow]]:
    """The pipelines with a step released in [since, until), broken first; the arrays in none, failed first; and
    the rows of every array read (the live ones too, `with_live`); five queries at most."""
    ended_jobs = released(jobs, since=since, until=until)
    alone_ids = ended_jobs.filter(array__isnull=True).values("pk")
    array_ids = set(ended_jobs.filter(array__isnull=False).order_by().values_list("array_id", flat=True).distinct())
    touching = Q(job__in=alone_ids) | Q(on_job__in=alone_ids) | Q(array__in=array_ids) | Q(on_array__in=array_ids)
    # The links' ids first, for the reason array_rows reads its arrays' first: joined to their jobs in the same
    # query, the links are guessed by the thousand and every job of the table is scanned to join them.
    link_ids = list(Dependency.objects.filter(touching).values_list("pk", flat=True))
    related = Dependency.objects.filter(pk__in=link_ids).select_related("job", "array", "on_job", "on_array")
    links = list(related) if link_ids else []
    linked = {row.array_id for row in links} | {row.on_array_id for row in links}
    tasks = Q(array_id__in=array_ids | linked - {None})
    window = Q(stage=Stage.RELEASE, released_at__gte=since) & (Q() if until is None else Q(released_at__lt=until))
    rows = array_rows(tasks | live_arrays(jobs) if with_live else tasks, window)

    def step(job: Job | None, array: JobArray | None) -> Step:
        if array is not None:
            return rows.get(array.pk) or ArrayRow(array=array)
        return Step(job=job)

    nodes: dict[tuple[str, uuid.UUID], Step] = {}
    edges: list[tuple] = []
    parent: dict[tuple, tuple] = {}

    def root(key: tuple) -> tuple:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    for row in links:
        down, up = step(row.job, row.array), step(row.on_job, row.on_array)
        for one in (down, up):
            nodes.setdefault(_key(one.node), one)
        edges.append((_key(up.node), _key(down.node)))
        parent[root(_key(down.node))] = root(_key(up.node))
    below: dict[tuple, set[tuple]] = {}
    for up_key, down_key in edges:
        below.setdefault(up_key, set()).add(down_key)
    groups: dict[tuple, dict[tuple[str, uuid.UUID], Step]] = {}
    for key, one in nodes.items():
        groups.setdefault(root(key), {})[key] = one
    found = [
        _where_it_broke(Pipeline(_ordered(group, [e for e in edges if e[0] in group])), below)
        for group in groups.values()
    ]
    far_past = datetime.min.replace(tzinfo=since.tzinfo)
    found.sort(key=lambda p: p.last_ended or far_past, reverse=True)
    found.sort(key=lambda p: p.broken is None)
    in_pipelines = {key[1] for key in nodes if key[0] == "array"}
    shown = [row for pk, row in rows.items() if pk not in in_pipelines and row.ended_in_window]
    shown.sort(key=lambda row: row.last_ended or far_past, reverse=True)
    shown.sort(key=lambda row: not row.failed)
    return found, shown, rows


def arrays_now(jobs: QuerySet[Job]) -> list[ArrayRow]:
    return sorted(array_rows(live_arrays(jobs)).values(), key=lambda row: row.node.name)


@dataclass(frozen=True)
class OpenFailure:
    name: str
    anchor: str  # the id of its card on the page
    words: str
    outcome: str = ""  # a job's, for its badge


def open_failures(pipelines: list[Pipeline], arrays: list[ArrayRow], rows: list[Ended]) -> list[OpenFailure]:
    """The pipelines a failure broke (not a cancel), the arrays with a failed task and the unfixed failed jobs."""
    found = [OpenFailure(p.broken.node.name, f"pipeline-{p.broken.node.pk}", "broke its pipeline")
             for p in pipelines if p.broken and p.broken.outcome in FAILURES]  # fmt: skip
    for row in (row for row in arrays if row.failed):
        array = cast(JobArray, row.array)  # an ArrayRow is an array's
        failed = ", ".join(f"{n} {words}" for key, words, n in row.counts_shown if key in FAILURES)
        words = f"{failed} of {array.size}" if failed else row.state_words
        found.append(OpenFailure(array.name, f"array-{array.pk}", words))
    found += [OpenFailure(r.job.name, f"ended-{r.job.pk}", r.job.get_outcome_display().lower(), r.job.outcome)
              for r in rows if r.failure and not r.fixed]  # fmt: skip
    return found
