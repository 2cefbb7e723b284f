"""Where an array stands, read from its tasks: its stage, its counts, and its tasks in the order shown."""

import uuid
from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db.models import Case, Count, IntegerField, Q, QuerySet, Sum, Value, When
from django.http import Http404

from jobs.models import HELD_STAGES, Job, JobArray, JobQuerySet, Outcome, Stage
from teams.access import AnyUser, teams_of

# Outcomes a resubmit of the failed tasks runs again: every end but success and a member's cancel.
FAILED = (Outcome.FAILED, Outcome.TIMED_OUT, Outcome.OUT_OF_MEMORY, Outcome.NODE_LOST, Outcome.REJECTED)
# The order tasks are shown in: failures first, then the running, the waiting, and the rest.
SHOWN_FIRST = [*FAILED, Stage.RUN, Stage.OUTPUT, Stage.RENT, Stage.SUBMIT, Outcome.CANCELLED, Outcome.SUCCEEDED]
# The array's own columns that change as its tasks end, read with its counts (counts_and_ends).
ENDS = ("released_at", "stopped_at", "stop_reason")


def visible_arrays(user: AnyUser) -> QuerySet[JobArray]:
    return JobArray.objects.filter(team__in=teams_of(user))


def array_in(arrays: QuerySet[JobArray], array_id: uuid.UUID | str) -> JobArray:
    """The array of that id among `arrays` (a query built on visible_arrays), else 404."""
    try:
        return arrays.get(pk=array_id)
    except (JobArray.DoesNotExist, ValidationError, ValueError, TypeError):  # a malformed id is no array either
        raise Http404("No such array.") from None


def tasks_of(array: JobArray) -> JobQuerySet:
    return Job.objects.filter(array=array).order_by("array_index")


def counts(array: JobArray) -> dict[str, int]:
    """Its tasks by where they are: a stage while not released, their outcome once released; one query."""
    rows = tasks_of(array).order_by().values_list("stage", "outcome").annotate(n=Count("pk"))
    return _by_place(rows)


def counts_and_ends(array: JobArray) -> dict[str, int]:
    """counts(), with the array's ENDS read by the same statement: read earlier, they could miss the stop that
    ended every task."""
    return counts_ends_and_attempts(array)[0]


def counts_ends_and_attempts(array: JobArray) -> tuple[dict[str, int], int]:
    """counts_and_ends(), and the sum of its tasks' attempts (which only grows), from the same statement."""
    columns = [f"array__{name}" for name in ENDS]
    rows = list(
        tasks_of(array)
        .order_by()
        .values_list(*columns, "stage", "outcome")
        .annotate(n=Count("pk"), attempts=Sum("attempt"))
    )
    if rows:  # every row carries the array's columns
        for name, value in zip(ENDS, rows[0], strict=False):
            setattr(array, name, value)
    found = _by_place(row[len(ENDS) : -1] for row in rows)
    return found, sum(row[-1] for row in rows)


def _by_place(rows: Iterable[tuple[str, str, int]]) -> dict[str, int]:
    found: dict[str, int] = {}
    for stage, outcome, n in rows:
        key = outcome if stage == Stage.RELEASE else stage
        found[key] = found.get(key, 0) + n
    return found


def stage_of(array: JobArray, found: dict[str, int] | None = None) -> str:
    """`release` once every task is released, else the earliest stage a task is at."""
    found = counts(array) if found is None else found
    for stage in (Stage.SUBMIT, *HELD_STAGES):
        if found.get(stage):
            return stage
    return Stage.RELEASE


def failures_first(array: JobArray) -> QuerySet[Job]:
    """Its tasks in the order a page shows them: by their place in SHOWN_FIRST, then by index."""
    key = Case(
        *[When(at_place(value), then=Value(i)) for i, value in enumerate(SHOWN_FIRST)],
        default=Value(len(SHOWN_FIRST)),
        output_field=IntegerField(),
    )
    return tasks_of(array).alias(shown=key).order_by("shown", "array_index")


def at_place(place: str) -> Q:
    """The tasks at a place of SHOWN_FIRST: released with that outcome, or at that stage."""
    return Q(stage=Stage.RELEASE, outcome=place) if place in Outcome.values else Q(stage=place)


def array_outcome(found: dict[str, int]) -> str:
    """A released array's outcome as one word: succeeded when every task did, else its most telling end."""
    for outcome in (*FAILED, Outcome.CANCELLED):
        if found.get(outcome):
            return str(outcome)
    return "succeeded"
