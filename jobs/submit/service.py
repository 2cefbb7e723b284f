"""SUBMIT: a job or an array declared by a team, through one function (`submit`) for every caller."""

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from django.contrib.auth.models import User
from django.core.files.base import File
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounting import budgets
from jobs.lifecycle import chains
from jobs.lifecycle.history import SUBMITTED, Actor, Moved, record_many
from jobs.lifecycle.worst_case import check_submission, request_estimate
from jobs.models import (
    DEFAULT_RETRY_ON,
    DataFile,
    Dependency,
    Input,
    Isolation,
    Job,
    JobArray,
    RuntimeImage,
    Stage,
    StoredBlob,
)  # fmt: skip
from jobs.scheduling.dispatch import request_schedule
from jobs.storage.blobs import lock_present
from jobs.storage.quotas import check_staged
from jobs.storage.store import delete_stored, file_digest, save_upload
from pool.models import Node, Queue
from pool.queues import default_queue
from teams.models import Team

if TYPE_CHECKING:  # an array's own part of a submission is there, and it submits through `submit` here
    from jobs.submit.arrays import ArrayRequest


@dataclass
class Declaration:
    """What a team declares: the work, the data, the request and the output (each a Job's field, but files)."""

    team: Team
    name: str
    image: RuntimeImage
    command: list[str]
    env: dict[str, str]
    cpus: int
    memory_mb: int
    gpus: int
    time_limit_s: int
    output_patterns: list[str]
    max_retries: int = 0
    files: Sequence[tuple[str, File]] = field(default_factory=list)  # (sanitized name, upload or stored file)
    # (name, blob): stored data the job names rather than copies (a template's files); a file of the same
    # name above wins.
    blobs: Sequence[tuple[str, StoredBlob]] = field(default_factory=list)
    isolation: str = Isolation.STANDARD
    pinned_node: Node | None = None  # only the isolation probes pin a job to a node
    retry_on: list[str] = field(default_factory=lambda: list(DEFAULT_RETRY_ON))
    retry_memory_factor: float = 1.0
    retry_delay_s: int = 0
    # (kind, the job or array of its team it waits for): Dependency.Kind's values.
    after: Sequence[tuple[str, Job | JobArray]] = ()
    # (the earlier job of its team, glob): its outputs staged at /data/from/<id>/; implies after ok on it.
    inputs: Sequence[tuple[Job, str]] = ()
    # Pool policy (pool.queues): the queue it waits in (None: its team's default, read at submit), the node
    # features it needs (pool.features, as checked), and whether a higher queue's job may preempt it.
    queue: Queue | None = None
    constraint: str = ""
    preemptable: bool = True

    @classmethod
    def from_job(cls, job: Job, **changes: Any) -> "Declaration":
        """The job as its team declared it, to submit again (a resubmit, an array's again, a template saved
        from it): its work, request, retry rules, isolation and pool policy. The memory is the first
        attempt's: a retry's larger one was the platform's answer to that run, and the new job retries the
        same way from where its team started. Its data, what it waits for and what it reads are each
        caller's own (`changes`), as every "again" names them differently."""
        memory_mb = job.past_attempts[0]["memory_mb"] if job.past_attempts else job.memory_mb
        declared = cls(
            team=job.team, name=job.name, image=job.image, command=job.command, env=job.env, cpus=job.cpus,
            memory_mb=memory_mb, gpus=job.gpus, time_limit_s=job.time_limit_s, output_patterns=job.output_patterns,
            max_retries=job.max_retries, retry_on=job.retry_on, retry_memory_factor=job.retry_memory_factor,
            retry_delay_s=job.retry_delay_s, isolation=job.isolation, queue=job.queue, constraint=job.constraint,
            preemptable=job.preemptable,
        )  # fmt: skip
        return replace(declared, **changes) if changes else declared

    @cached_property
    def fingerprint(self) -> str:
        """The sha256 of the declaration in a canonical form: every field, and each data file's name and
        sha256 (in name order: the order files were sent in changes nothing the job sees)."""
        canonical = {
            "team": self.team.slug,
            "name": self.name,
            "image": self.image.name,
            "command": self.command,
            "env": self.env,
            "request": [self.cpus, self.memory_mb, self.gpus, self.time_limit_s],
            "output_patterns": self.output_patterns,
            "max_retries": self.max_retries,
            "data": sorted(
                [[name, file_digest(upload)[1]] for name, upload in self.files]
                + [[name, blob.sha256] for name, blob in self.named_blobs]
            ),
        }
        if self.isolation != Isolation.STANDARD:  # so the fingerprints kept before it existed still match
            canonical["isolation"] = self.isolation
        if self.retry_on != DEFAULT_RETRY_ON or self.retry_memory_factor != 1 or self.retry_delay_s:
            canonical["retry"] = [sorted(self.retry_on), self.retry_memory_factor, self.retry_delay_s]
        # Said only when not the defaults, so the fingerprints kept before queues existed still match.
        if (self.queue is not None and not self.queue.is_default) or self.constraint or not self.preemptable:
            canonical["policy"] = [self.queue.name if self.queue else "", self.constraint, self.preemptable]
        if self.after or self.inputs:
            canonical["after"] = sorted([kind, str(upstream.pk)] for kind, upstream in self.after)
            canonical["inputs"] = sorted([str(job.pk), glob] for job, glob in self.inputs)
        text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    def job_columns(self) -> dict[str, object]:
        """Its fields a Job stores as they are (not the files, blobs, dependencies and inputs, which are rows)."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("files", "blobs", "after", "inputs")
        }

    def with_queue(self) -> "Declaration":
        """Itself with its queue named: its team's default when it names none (pool.queues.default_queue)."""
        return self if self.queue is not None else replace(self, queue=default_queue(self.team))

    def dependencies(self, *, job: Job | None = None, array: JobArray | None = None) -> list[Dependency]:
        """Its Dependency rows, not saved: those declared, and after ok on each job it reads outputs of."""
        pairs = {(kind, upstream.pk): upstream for kind, upstream in self.after}
        for source, _glob in self.inputs:
            pairs.setdefault((Dependency.Kind.OK, source.pk), source)
        return [
            Dependency(
                job=job,
                array=array,
                kind=kind,
                on_job=upstream if isinstance(upstream, Job) else None,
                on_array=upstream if isinstance(upstream, JobArray) else None,
            )  # fmt: skip
            for (kind, _pk), upstream in pairs.items()
        ]

    def input_rows(self, *, job: Job | None = None, array: JobArray | None = None) -> list[Input]:
        return [Input(job=job, array=array, from_job=source, glob=glob) for source, glob in self.inputs]

    @property
    def named_blobs(self) -> list[tuple[str, StoredBlob]]:
        """The blobs the job names: those of a name no file of its own has."""
        own = {name for name, _upload in self.files}
        return [(name, blob) for name, blob in self.blobs if name not in own]


class IdempotencyKeyReused(Exception):
    """The Idempotency-Key was sent before with a different request: what it made (a job or an array) is not
    this one."""

    def __init__(self, made: "Job | JobArray") -> None:
        super().__init__(f"the key of {made._meta.verbose_name} {made.pk} was sent with a different request")
        self.made = made


MAX_IDEMPOTENCY_KEY = Job._meta.get_field("idempotency_key").max_length or 255
Made = TypeVar("Made", Job, JobArray)


def made_with_key(model: type[Made], *, user: User, key: str) -> Made | None:
    """What `user` made with the Idempotency-Key `key` (a job or an array), or None."""
    if len(key) > MAX_IDEMPOTENCY_KEY:
        raise ValueError(f"an idempotency key has at most {MAX_IDEMPOTENCY_KEY} characters")
    return model.objects.filter(submitted_by=user, idempotency_key=key).first()


def same_request(made: Made, fingerprint: str) -> Made:
    """The one idempotency rule of a job and an array alike (docs/api.md): what a key made is answered
    again when `fingerprint` is the request it was made with; IdempotencyKeyReused when it is another. One
    made before fingerprints were kept (none stored) is taken as the same."""
    if made.request_fingerprint and made.request_fingerprint != fingerprint:
        raise IdempotencyKeyReused(made)
    return made


class OwnPart(Generic[Made]):
    """What a job and an array submit each their own way (`submit` does every other step once): the row it
    makes, how its data is stored and claimed, and the rows it writes. One is made for each submission."""

    model: type[Made]
    tasks = 1  # jobs its worst case counts

    def __init__(self, declaration: Declaration) -> None:
        self.declaration = declaration

    def fingerprint(self) -> str:
        """The request an Idempotency-Key is sent with (jobs.submit.service.same_request)."""
        return self.declaration.fingerprint

    def row(self, *, user: User, now: datetime, key: str, fingerprint: str, dependencies: list[Dependency]) -> Made:
        """Its row, not saved."""
        raise NotImplementedError

    def store(self, made: Made) -> None:
        """Store its data, before any lock: one team's upload never holds up its other submissions."""

    def claim(self, *, now: datetime) -> None:
        """Under the team's lock: lock the blobs it names (jobs.storage.blobs.BlobGone when one was freed
        meanwhile) and keep those it stored."""
        lock_present(self.declaration.named_blobs)

    def save(self, made: Made, *, user: User, now: datetime) -> list[Job]:
        """Save its rows once its worst case is allowed; returns the jobs it made."""
        raise NotImplementedError

    def undo(self, made: Made) -> None:
        """Remove what `store` left, when the submission failed."""

    def again(self, made: Made) -> Made:
        """What an Idempotency-Key made, answered again."""
        return made


class JobPart(OwnPart[Job]):
    """A job: its data files stored for it alone (the blobs it names aside), counted in its team's store quota."""

    model = Job

    def row(self, *, user: User, now: datetime, key: str, fingerprint: str, dependencies: list[Dependency]) -> Job:
        self.dependencies = dependencies
        return Job(
            **self.declaration.job_columns(),
            held_back=bool(dependencies),
            wait_reason=chains.held_back_words(dependencies) if dependencies else "",
            submitted_by=user,
            idempotency_key=key,
            request_fingerprint=fingerprint,
            submitted_at=now,
        )

    def store(self, made: Job) -> None:
        declared = self.declaration
        self.staged = [DataFile(job=made, name=name, **_stored(made, name, upload)) for name, upload in declared.files]
        self.staged += [
            DataFile(job=made, name=name, size=b.size, sha256=b.sha256, blob=b) for name, b in declared.named_blobs
        ]

    def save(self, made: Job, *, user: User, now: datetime) -> list[Job]:
        # Refused (accounting.store_quotas.OverQuota) when its data would pass the team's store quota; the
        # blobs it names are counted already.
        check_staged(made.team, [f.size for f in self.staged if f.blob is None], now=now)
        made.save(force_insert=True)
        DataFile.objects.bulk_create(self.staged)  # one INSERT for every file
        # What an answer shows beside a job (jobs.api.serializers.shown_relations), known here without a query.
        made.shown_holds, made.shown_data_files = [], self.staged
        made.shown_dependencies, made.shown_inputs = self.dependencies, self.declaration.input_rows(job=made)
        # A schedule's run names its job only once it is made (schedules.runs): none names this one yet.
        made.shown_schedule = None  # type: ignore[attr-defined]
        return [made]

    def undo(self, made: Job) -> None:
        delete_stored(made.pk)


@overload
def submit(
    declaration: Declaration, *, user: User, idempotency_key: str = "", array: None = None
) -> tuple[Job, bool]: ...
@overload
def submit(
    declaration: Declaration, *, user: User, idempotency_key: str = "", array: "ArrayRequest"
) -> tuple[JobArray, bool]: ...
@overload
def submit(
    declaration: Declaration, *, user: User, idempotency_key: str = "", array: "ArrayRequest | None"
) -> tuple[Job | JobArray, bool]: ...
def submit(
    declaration: Declaration, *, user: User, idempotency_key: str = "", array: "ArrayRequest | None" = None
) -> tuple[Job | JobArray, bool]:
    """SUBMIT: the job declared, or with `array` as many tasks as it names (jobs.submit.arrays); returns
    (the job or array, created).

    1. A repeated Idempotency-Key with the same request (its fingerprint) returns what it made first, also
       when two requests race (the unique constraint on the key decides, and the loser reads the winner's);
       with another request it raises IdempotencyKeyReused.
    2. Its data is stored before the team's lock is taken; if the submission fails, what was stored for it
       alone is removed: nothing partial is left.
    3. Under the team's lock (taken when it stores data or its team has a budget), the blobs it names are
       locked (jobs.storage.blobs.BlobGone), and its worst case (every task's) is checked against the team's
       monthly budget (accounting.budgets.OverBudget) and its data against the store quota
       (accounting.store_quotas.OverQuota).
    4. Its rows are written (one INSERT per table, per batch of an array's tasks), each job's SUBMITTED
       record, what it waits for and reads, and the scheduler is asked for a pass.
    """
    declaration = declaration.with_queue()
    if array is None:
        return _submit(JobPart(declaration), user, idempotency_key)
    return _submit(array.part(declaration), user, idempotency_key)


def _submit(part: OwnPart[Made], user: User, key: str) -> tuple[Made, bool]:
    declaration = part.declaration
    fingerprint = part.fingerprint() if key else ""
    if key and (made := made_with_key(part.model, user=user, key=key)) is not None:
        return part.again(same_request(made, fingerprint)), False
    now = timezone.now()
    dependencies = declaration.dependencies()
    made = part.row(user=user, now=now, key=key, fingerprint=fingerprint, dependencies=dependencies)
    try:
        part.store(made)
        with transaction.atomic():
            worst = request_estimate(
                cpus=declaration.cpus, memory_mb=declaration.memory_mb, gpus=declaration.gpus,
                time_limit_s=declaration.time_limit_s, image=declaration.image, now=now,
            )  # fmt: skip
            # The budget and the store quota count the team's jobs so far: one submission of a team at a
            # time checks them. Most teams have no budget (read as the form loaded the team, no query).
            if declaration.files or budgets.budget_unit(declaration.team, loaded=True) is not None:
                budgets.lock_team(declaration.team)
            part.claim(now=now)
            tasks = part.tasks
            whole = replace(worst, cost=worst.cost * tasks, core_hours=worst.core_hours * tasks)
            check_submission(declaration.team, whole, now=now)  # or accounting.budgets.OverBudget
            jobs = part.save(made, user=user, now=now)
            record_many(
                [Moved(j.pk, j.attempt) for j in jobs], SUBMITTED, stage=Stage.SUBMIT, actor=Actor.person(user), at=now
            )
            if dependencies:
                save_chain(declaration, made)
            request_schedule()
    except IntegrityError:
        part.undo(made)
        if key:  # a concurrent request with the same key won the race
            winner = part.model.objects.get(submitted_by=user, idempotency_key=key)
            return part.again(same_request(winner, fingerprint)), False
        raise
    except BaseException:
        part.undo(made)
        raise
    made.submitted_estimate = whole
    return made, True


def save_chain(declaration: Declaration, made: Job | JobArray) -> None:
    """Save what a job (or array) waits for and reads; the next pass looks at each upstream again."""
    job, array = (made, None) if isinstance(made, Job) else (None, made)
    dependencies = Dependency.objects.bulk_create(declaration.dependencies(job=job, array=array))
    Input.objects.bulk_create(declaration.input_rows(job=job, array=array))
    chains.touch_upstream(dependencies)


def _stored(job: Job, name: str, upload: File) -> dict[str, int | str]:
    size, sha256 = save_upload(job.pk, name, upload)
    return {"size": size, "sha256": sha256}
