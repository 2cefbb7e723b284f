"""The job's stage transitions: one table, consulted by every action in jobs.lifecycle.actions; an event it does
not name for the job's stage raises InvalidTransition. Read top to bottom, it is the life of a job."""

from django.db import models

from core.outcomes import Outcome
from jobs.models import Stage


class Event(models.TextChoices):
    HOLD = "hold", "compute held on a node"
    REJECT = "reject", "the request can never fit the pool, or its node cannot meet what it requires"
    CANCEL = "cancel", "cancelled before it ran"
    START = "start", "container started on the held compute"
    FINISH = "finish", "container gone: exited, time limit, memory limit, cancelled"
    COLLECT = "collect", "outputs collected (or refused)"
    LOSE = "lose", "the node holding it was lost"
    RETRY = "retry", "the node holding it was lost; back to the queue for another attempt"
    # Not a move: a job of a higher queue asked for a running job's compute (written on both jobs).
    PREEMPT = "preempt", "a job of a higher queue asked for its compute"


class InvalidTransition(Exception):
    pass


TRANSITIONS: dict[tuple[str, str], str] = {
    (Stage.SUBMIT, Event.HOLD): Stage.RENT,
    (Stage.SUBMIT, Event.REJECT): Stage.RELEASE,
    (Stage.SUBMIT, Event.CANCEL): Stage.RELEASE,
    (Stage.RENT, Event.REJECT): Stage.RELEASE,
    (Stage.RENT, Event.CANCEL): Stage.RELEASE,
    (Stage.RENT, Event.START): Stage.RUN,
    (Stage.RUN, Event.FINISH): Stage.OUTPUT,
    (Stage.OUTPUT, Event.COLLECT): Stage.RELEASE,
    (Stage.RENT, Event.LOSE): Stage.RELEASE,
    (Stage.RUN, Event.LOSE): Stage.RELEASE,
    (Stage.OUTPUT, Event.LOSE): Stage.RELEASE,
    (Stage.RENT, Event.RETRY): Stage.SUBMIT,
    (Stage.RUN, Event.RETRY): Stage.SUBMIT,
    (Stage.OUTPUT, Event.RETRY): Stage.SUBMIT,
}

RUN_OUTCOMES = frozenset({Outcome.SUCCEEDED, Outcome.FAILED, Outcome.TIMED_OUT, Outcome.OUT_OF_MEMORY})

# The outcomes an event may give a job; events not listed give none.
OUTCOMES: dict[str, frozenset[str]] = {
    Event.REJECT: frozenset({Outcome.REJECTED}),
    Event.CANCEL: frozenset({Outcome.CANCELLED}),
    Event.FINISH: RUN_OUTCOMES | {Outcome.CANCELLED, Outcome.PREEMPTED},
    Event.COLLECT: RUN_OUTCOMES | {Outcome.CANCELLED, Outcome.PREEMPTED},
    Event.LOSE: frozenset({Outcome.NODE_LOST}),
}


def next_stage(stage: str, event: str, *, outcome: str = "") -> str:
    """The stage `event` moves a job at `stage` to; raises InvalidTransition when it may not."""
    target = TRANSITIONS.get((stage, event))
    if target is None:
        raise InvalidTransition(f"a job at {stage} cannot take the event {event}")
    if outcome and outcome not in OUTCOMES.get(event, frozenset()):
        raise InvalidTransition(f"{event} cannot end a job as {outcome!r}")
    return target


def stages_taking(event: str) -> list[str]:
    """The stages from which `event` moves a job (for conditional updates)."""
    return [stage for (stage, e) in TRANSITIONS if e == event]


def target_of(event: str) -> str:
    """The one stage `event` leads to, wherever it starts."""
    (target,) = {to for (_, e), to in TRANSITIONS.items() if e == event}
    return target
