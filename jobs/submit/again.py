"""Submit again: a job with the fields a person changes, and an array's tasks (all, or the failed ones) as a new
array of the same declaration, through jobs.submit.service.submit."""

import json
import shlex
from typing import Any

from django.contrib.auth.models import User
from django.http import QueryDict

from core.refusals import Refused
from jobs.lifecycle.array_state import FAILED, tasks_of
from jobs.models import DEFAULT_RETRY_ON, Job, JobArray
from jobs.submit.arrays import ARRAY_ENV, ArrayRequest
from jobs.submit.declaration import Declaration
from jobs.submit.scripts import script_of
from jobs.submit.service import submit
from pool.queues import may_use, refusals


class NothingToResubmit(Exception):
    pass


class QueueClosed(Refused):
    """The queue an array's tasks waited in no longer takes its team's jobs, or not as they were asked."""

    field = "queue"


def resubmit_array(array: JobArray, *, only: str, user: User) -> JobArray:
    """A new array of the same declaration, data and inputs: of the failed tasks' indices (`only="failed"`), or of
    all; dependencies are not carried over (what they waited for has run)."""
    tasks = tasks_of(array)
    if only == "failed":
        tasks = tasks.ended().filter(outcome__in=FAILED)
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
    request = ArrayRequest(indices, max_running=array.max_running, stop_after_failures=array.stop_after_failures)
    again, _created = submit(declaration, user=user, array=request)
    JobArray.objects.filter(pk=again.pk).update(resubmitted_from=array)
    again.resubmitted_from = array
    return again


def _check_queue(declaration: Declaration) -> None:
    """An operator may have closed the queue to the team, or changed its rules, since the first array."""
    queue = declaration.queue
    if queue is None:
        return
    if not may_use(queue, declaration.team):
        raise QueueClosed(f"The team {declaration.team.slug} may not use the queue {queue.name}.")
    if found := refusals(queue, cpus=declaration.cpus, preemptable=declaration.preemptable):
        raise QueueClosed(found[0].message)


def declared_fields(job: Job) -> dict[str, Any]:
    """The submit form's fields of the job as declared: the resubmit form's, and what an API resubmit keeps."""
    declared = Declaration.from_job(job)
    # A job of the script box comes back in the script box.
    script = script_of(declared.command)
    return {
        "team": declared.team.slug,
        "name": declared.name,
        "image": declared.image.name,
        "command": "" if script else shlex.join(declared.command),
        "script": script or "",
        "env": json.dumps(declared.env) if declared.env else "",
        "cpus": declared.cpus,
        "memory_mb": declared.memory_mb,
        "gpus": declared.gpus,
        "time_limit_s": declared.time_limit_s,
        "max_retries": declared.max_retries,
        # The default rule left out, so the "More" section stays folded for a job that kept it.
        "retry_on": "" if declared.retry_on == list(DEFAULT_RETRY_ON) else ", ".join(declared.retry_on),
        "retry_memory_factor": declared.retry_memory_factor,
        "retry_delay_s": declared.retry_delay_s,
        "isolation": declared.isolation,
        "outputs": "\n".join(declared.output_patterns),
        "queue": declared.queue.name if declared.queue else "",
        "constraint": declared.constraint,
        "preemptable": "" if declared.preemptable else "false",
    }


# Fields of which one replaces the other: a resubmit that sends one leaves out the earlier job's other.
EITHER = ("command", "script")


def resubmit_data(job: Job, sent: Any) -> dict[str, Any] | QueryDict:
    """The form's data of a resubmit of `job`: the fields `sent` (a QueryDict or a JSON object) over its declared
    ones, and, unless `sent` names them, every data file of the job reused from the store."""
    earlier = declared_fields(job)
    if any(name in sent for name in EITHER):
        earlier = {name: value for name, value in earlier.items() if name not in EITHER}
    earlier["reuse"] = [f.name for f in job.data_files.all()]
    if isinstance(sent, QueryDict):
        # Its fields alone, taken list by list: DRF's request.data holds the uploads too, which the form
        # is given apart, and a copy() would deep-copy their open temporary files (a TypeError).
        data = QueryDict(mutable=True)
        for name, values in sent.lists():
            if not any(hasattr(value, "read") for value in values):
                data.setlist(name, values)
        for name, value in earlier.items():
            if name not in data:
                data.setlist(name, value if isinstance(value, list) else [value])
        return data
    return {**earlier, **sent}
