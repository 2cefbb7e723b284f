"""SUBMIT: a job or an array declared by a team, through one function (`submit`) for every caller."""

from dataclasses import replace
from datetime import datetime
from typing import overload

from django.contrib.auth.models import User
from django.core.files.base import File
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounting import budgets
from jobs.lifecycle import chains
from jobs.lifecycle.history import SUBMITTED, Actor, Moved, record_many
from jobs.lifecycle.worst_case import check_submission, request_estimate
from jobs.models import (
    DataFile,
    Dependency,
    Input,
    Job,
    JobArray,
    Stage,
)  # fmt: skip
from jobs.scheduling.dispatch import request_schedule
from jobs.storage.quotas import StagedData
from jobs.storage.store import delete_stored, save_upload
from jobs.submit.arrays import ArrayRequest
from jobs.submit.declaration import Declaration, Made, OwnPart


class IdempotencyKeyReused(Exception):
    """The Idempotency-Key was sent before with a different request: what it made (a job or an array) is not
    this one."""

    def __init__(self, made: "Job | JobArray") -> None:
        super().__init__(f"the key of {made._meta.verbose_name} {made.pk} was sent with a different request")
        self.made = made


MAX_IDEMPOTENCY_KEY = Job._meta.get_field("idempotency_key").max_length or 255


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


class JobPart(OwnPart[Job]):
    """A job: its data files stored for it alone (the blobs it names aside), counted in its team's store quota."""

    model = Job

    def row(self, *, user: User, now: datetime, key: str, fingerprint: str, dependencies: list[Dependency]) -> Job:
        self.dependencies = dependencies
        return Job(
            **self.declaration.job_columns(),
            resubmitted_from=self.declaration.resubmitted_from,
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
        # Its data against the team's store quota, checked in `save`; the blobs it names are counted already.
        self.quota = StagedData(made.team, [f.size for f in self.staged if f.blob is None], now=made.submitted_at)

    def save(self, made: Job, *, user: User, now: datetime) -> list[Job]:
        self.quota.check()  # or accounting.store_quotas.OverQuota
        made.save(force_insert=True)
        DataFile.objects.bulk_create(self.staged)  # one INSERT for every file
        # What an answer shows beside a job (jobs.api.serializers.shown_relations), known here without a query.
        made.shown_holds, made.shown_data_files = [], self.staged
        made.shown_dependencies, made.shown_inputs = self.dependencies, self.declaration.input_rows(job=made)
        made.shown_resubmissions = []
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
    declaration: Declaration, *, user: User, idempotency_key: str = "", array: ArrayRequest
) -> tuple[JobArray, bool]: ...
@overload
def submit(
    declaration: Declaration, *, user: User, idempotency_key: str = "", array: ArrayRequest | None
) -> tuple[Job | JobArray, bool]: ...
def submit(
    declaration: Declaration, *, user: User, idempotency_key: str = "", array: ArrayRequest | None = None
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
