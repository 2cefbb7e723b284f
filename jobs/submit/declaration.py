"""The one declaration every submission takes (a job, an array's tasks, a resubmit, a template's or a
schedule's run) and the base of what a job and an array submit each their own way."""

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from functools import cached_property
from typing import Any, Generic, TypeVar

from django.contrib.auth.models import User
from django.core.files.base import File

from jobs.models import DEFAULT_RETRY_ON, Dependency, Input, Isolation, Job, JobArray, RuntimeImage, StoredBlob
from jobs.storage.blobs import lock_present
from jobs.storage.store import file_digest
from pool.models import Node, Queue
from pool.queues import default_queue
from teams.models import Team

Made = TypeVar("Made", Job, JobArray)
# What a Declaration keeps that a Job does not store as a column of each of its jobs: rows of their own, and
# the resubmitted job (a job's, JobPart.row; not an array's tasks').
NOT_COLUMNS = ("files", "blobs", "after", "inputs", "resubmitted_from")


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
    # The earlier job this one submits again (a person's resubmit of a job); an array's tasks keep none.
    resubmitted_from: Job | None = None

    @classmethod
    def from_job(cls, job: Job, **changes: Any) -> "Declaration":
        """The job as its team declared it, to submit again; the memory is the first attempt's (a retry's larger
        one was the platform's answer to that run). Its data and chain are each caller's own (`changes`)."""
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
        if self.resubmitted_from is not None:  # said only when set: the fingerprints kept before still match
            canonical["resubmitted_from"] = str(self.resubmitted_from.pk)
        if self.after or self.inputs:
            canonical["after"] = sorted([kind, str(upstream.pk)] for kind, upstream in self.after)
            canonical["inputs"] = sorted([str(job.pk), glob] for job, glob in self.inputs)
        text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    def job_columns(self) -> dict[str, object]:
        """Its fields a Job stores as they are (not the files, blobs, dependencies and inputs, which are rows)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in NOT_COLUMNS}

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
        """Under the team's lock: lock the blobs it names (BlobGone when one was freed) and keep those it stored."""
        lock_present(self.declaration.named_blobs)

    def save(self, made: Made, *, user: User, now: datetime) -> list[Job]:
        """Save its rows once its worst case is allowed; returns the jobs it made."""
        raise NotImplementedError

    def undo(self, made: Made) -> None:
        """Remove what `store` left, when the submission failed."""

    def again(self, made: Made) -> Made:
        """What an Idempotency-Key made, answered again."""
        return made
