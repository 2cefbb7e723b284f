"""Submit again: an array's tasks (all, or the failed ones) as a new array of the same declaration, through
jobs.submit.service.submit, its queue checked as a submission's is."""

from django.contrib.auth.models import User

from core.refusals import Refused
from jobs.lifecycle.array_state import FAILED, tasks_of
from jobs.models import JobArray
from jobs.submit.arrays import ARRAY_ENV, ArrayRequest
from jobs.submit.declaration import Declaration
from jobs.submit.service import submit
from pool.queues import may_use, refusals


class NothingToResubmit(Exception):
    pass


class QueueClosed(Refused):
    """The queue an array's tasks waited in no longer takes its team's jobs, or not as they were asked."""

    field = "queue"


def resubmit_array(array: JobArray, *, only: str, user: User) -> JobArray:
    """A new array of the same declaration: of the failed tasks' indices (`only="failed"`), or of all.
    Its tasks name the same stored data and read the same inputs; dependencies are not carried over
    (what they waited for has run)."""
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
    """An operator may have closed the queue to the team, or changed its rules, since the first array: a
    resubmit is checked as a submission is (pool.queues), else it would slip into a queue the team may not use."""
    queue = declaration.queue
    if queue is None:
        return
    if not may_use(queue, declaration.team):
        raise QueueClosed(f"The team {declaration.team.slug} may not use the queue {queue.name}.")
    if found := refusals(queue, cpus=declaration.cpus, preemptable=declaration.preemptable):
        raise QueueClosed(found[0].message)
