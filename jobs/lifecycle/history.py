"""A job's history: the JobEvent rows jobs.lifecycle.actions and jobs.submit.service write in each change's
transaction, naming who or what acted."""

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import User
from django.db.models import QuerySet

from jobs.models import Job, JobEvent

SUBMITTED = "submit"  # the event of a job's making, which no transition names


@dataclass(frozen=True)
class Actor:
    """Who or what acted on a job, named as its history shows it."""

    name: str
    user: User | None = None

    @classmethod
    def person(cls, user: User) -> "Actor":
        return cls(user.get_username(), user)

    @classmethod
    def node(cls, name: str) -> "Actor":
        return cls(f"node {name}")


SCHEDULER = Actor("scheduler")
REAPER = Actor("reaper")  # declares a silent node lost and ends or retries the jobs it held
PLATFORM = Actor("platform")  # an action called with no one named (a shell, a script)


@dataclass(frozen=True)
class Moved:
    """One job an event moved: its attempt then, and the event's words for it."""

    job_id: uuid.UUID
    attempt: int
    reason: str = ""


def record(
    job: Job, event: str, *, stage: str, actor: Actor, at: datetime, outcome: str = "", reason: str = ""
) -> None:
    """One change of `job`, in its current attempt and the caller's transaction."""
    record_many([Moved(job.pk, job.attempt, reason)], event, stage=stage, actor=actor, at=at, outcome=outcome)


def record_many(
    moved: Iterable[Moved], event: str, *, stage: str, actor: Actor, at: datetime, outcome: str = ""
) -> None:
    """The same change of several jobs (a scheduler pass holding them), in one INSERT."""
    JobEvent.objects.bulk_create(
        JobEvent(
            job_id=m.job_id, at=at, event=event, stage=stage, outcome=outcome, attempt=m.attempt,
            actor=actor.name, actor_user=actor.user, reason=m.reason,
        )
        for m in moved
    )  # fmt: skip


def events_of(job: Job) -> QuerySet[JobEvent]:
    """The job's history, oldest first (the order they were written breaking ties of one moment)."""
    return JobEvent.objects.filter(job_id=job.pk).order_by("at", "id")
