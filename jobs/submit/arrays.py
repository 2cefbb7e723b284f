"""Arrays: one declaration run as many tasks, each a job of its own (its own hold, outputs, record and
events) that knows its index from E31_ARRAY_INDEX. Its data is stored once, as blobs every task names."""

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from datetime import datetime

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounting import budgets
from core.refusals import Refused
from jobs.lifecycle import actions, chains
from jobs.lifecycle.array_state import FAILED, tasks_of
from jobs.lifecycle.history import SUBMITTED, Actor, Moved, record_many
from jobs.lifecycle.worst_case import check_submission, request_estimate
from jobs.models import DataFile, Job, JobArray, Stage
from jobs.scheduling.dispatch import request_schedule
from jobs.storage import blobs
from jobs.submit.service import Declaration, made_with_key, same_request, save_chain
from pool.queues import may_use, refusals

ARRAY_ENV = ("E31_ARRAY_INDEX", "E31_ARRAY_SIZE", "E31_ARRAY_ID")
INSERT_BATCH = 2000  # rows a statement inserts at most, so a 10,000-task array is five INSERTs a table


class NothingToResubmit(Exception):
    pass


class QueueClosed(Refused):
    """The queue an array's tasks waited in no longer takes its team's jobs, or not as they were asked."""

    field = "queue"


def submit_array(
    declaration: Declaration, *, indices: Sequence[int], max_running: int | None, stop_after_failures: int | None,
    user: User, idempotency_key: str = "",
) -> JobArray:  # fmt: skip
    """Create the array and its tasks: one INSERT per table per batch of tasks, its data stored once as the
    team's blobs (counted once in its store quota) and its whole worst case checked against the team's
    budget (accounting.budgets.OverBudget). Tasks beyond `max_running`, or all while dependencies are
    unmet, are held back: the scheduler does not read them until jobs.lifecycle.chains lets them go.

    An Idempotency-Key sent again with the same request returns the array it made (`created` False), also
    when two requests race; with another request it raises IdempotencyKeyReused (jobs.submit.service.same_request)."""
    declaration = declaration.with_queue()
    fingerprint = _fingerprint(declaration, indices, max_running, stop_after_failures) if idempotency_key else ""
    if idempotency_key and (made := made_with_key(JobArray, user=user, key=idempotency_key)) is not None:
        return _again(same_request(made, fingerprint))
    try:
        return _submit(declaration, indices, max_running, stop_after_failures, user, idempotency_key, fingerprint)
    except IntegrityError:
        if not idempotency_key:
            raise
        winner = JobArray.objects.get(submitted_by=user, idempotency_key=idempotency_key)
        return _again(same_request(winner, fingerprint))


def _again(array: JobArray) -> JobArray:
    array.created = False
    return array


def _fingerprint(
    declaration: Declaration, indices: Sequence[int], max_running: int | None, stop_after_failures: int | None
) -> str:
    text = json.dumps([declaration.fingerprint, list(indices), max_running, stop_after_failures])
    return hashlib.sha256(text.encode()).hexdigest()


def _submit(
    declaration: Declaration, indices: Sequence[int], max_running: int | None, stop_after_failures: int | None,
    user: User, idempotency_key: str, fingerprint: str,
) -> JobArray:  # fmt: skip
    now = timezone.now()
    team = declaration.team
    written = blobs.write(team, declaration.files)  # before any lock: a slow upload holds up nothing
    array = JobArray(
        team=team, submitted_by=user, name=declaration.name, size=len(indices), max_running=max_running,
        stop_after_failures=stop_after_failures, submitted_at=now, idempotency_key=idempotency_key,
        request_fingerprint=fingerprint,
    )  # fmt: skip
    dependencies = declaration.dependencies()
    array.waiting_on_dependencies = bool(dependencies)
    with transaction.atomic():
        worst = request_estimate(
            cpus=declaration.cpus, memory_mb=declaration.memory_mb, gpus=declaration.gpus,
            time_limit_s=declaration.time_limit_s, image=declaration.image, now=now,
        )  # fmt: skip
        if written or budgets.budget_unit(team, loaded=True) is not None:
            budgets.lock_team(team)
        named = [*blobs.keep(team, written, now=now, kind="data files"), *declaration.named_blobs]
        blobs.lock_present(declaration.named_blobs)  # or jobs.storage.blobs.BlobGone
        size = len(indices)
        whole = dataclasses.replace(worst, cost=worst.cost * size, core_hours=worst.core_hours * size)
        check_submission(team, whole, now=now)  # or accounting.budgets.OverBudget
        array.save(force_insert=True)
        tasks = _tasks(declaration, array, indices, user=user, held_back_words=_words(array, dependencies), now=now)
        Job.objects.bulk_create(tasks, batch_size=INSERT_BATCH)
        files = [DataFile(job=t, name=n, size=b.size, sha256=b.sha256, blob=b) for t in tasks for n, b in named]
        DataFile.objects.bulk_create(files, batch_size=INSERT_BATCH)
        moved = [Moved(task.pk, 1) for task in tasks]
        record_many(moved, SUBMITTED, stage=Stage.SUBMIT, actor=Actor.person(user), at=now)
        if dependencies:
            save_chain(declaration, array=array)
        request_schedule()
    array.submitted_estimate = whole
    return array


def _words(array: JobArray, dependencies: list) -> str:
    return chains.held_back_words(dependencies) if dependencies else chains.max_running_words(array)


def _tasks(
    declaration: Declaration, array: JobArray, indices: Sequence[int], *, user: User, held_back_words: str,
    now: datetime,
) -> list[Job]:  # fmt: skip
    same = declaration.job_columns()
    free = 0 if array.waiting_on_dependencies else (array.max_running or len(indices))
    size = str(len(indices))
    return [
        Job(
            **{
                **same,
                "env": {
                    **declaration.env,
                    "E31_ARRAY_INDEX": str(index),
                    "E31_ARRAY_SIZE": size,
                    "E31_ARRAY_ID": str(array.pk),
                },
            },
            array=array,
            array_index=index,
            submitted_by=user,
            submitted_at=now,
            held_back=n >= free,
            wait_reason=held_back_words if n >= free else "",
        )  # fmt: skip
        for n, index in enumerate(indices)
    ]


def cancel_array(array: JobArray, *, now: datetime, acting_user: User | None = None) -> int:
    """Every task not yet released ends cancelled: those waiting at once, a running one by its node."""
    who = acting_user.get_username() if acting_user is not None else "the platform"
    return actions.stop_array(array, reason=f"cancelled with its array by {who}", now=now, acting_user=acting_user)


def resubmit_array(array: JobArray, *, only: str, user: User) -> JobArray:
    """A new array of the same declaration: of the failed tasks' indices (`only="failed"`), or of all.
    Its tasks name the same stored data and read the same inputs; dependencies are not carried over
    (what they waited for has run)."""
    tasks = tasks_of(array)
    if only == "failed":
        tasks = tasks.filter(stage=Stage.RELEASE, outcome__in=FAILED)
    indices = [i for i in tasks.values_list("array_index", flat=True) if i is not None]
    if not indices:
        raise NothingToResubmit(f"array {array.pk} has no {'failed ' if only else ''}tasks to run again")
    first = tasks_of(array).select_related("team", "image", "queue").first()
    assert first is not None
    inputs = [(i.from_job, i.glob) for i in array.inputs.select_related("from_job")]
    declaration = Declaration.from_job(
        first, name=array.name, env={k: v for k, v in first.env.items() if k not in ARRAY_ENV},
        blobs=[(f.name, f.blob) for f in first.data_files.select_related("blob") if f.blob is not None],
        inputs=inputs,
    )  # fmt: skip
    _check_queue(declaration)
    again = submit_array(
        declaration, indices=indices, max_running=array.max_running,
        stop_after_failures=array.stop_after_failures, user=user,
    )  # fmt: skip
    JobArray.objects.filter(pk=again.pk).update(resubmitted_from=array)
    again.resubmitted_from = array
    return again


def _check_queue(declaration: Declaration) -> None:
    """An operator may have closed the queue to the team, or changed its rules, since the first array: a
    resubmit is checked as a submission is (pool.queues), else it would slip into a queue the team may not use."""
    queue = declaration.queue
    if queue is None:
        return
    if not may_use(queue, declaration.team):
        raise QueueClosed(f"The team {declaration.team.slug} may not use the queue {queue.name}.")
    if found := refusals(queue, cpus=declaration.cpus, preemptable=declaration.preemptable):
        raise QueueClosed(found[0].message)
