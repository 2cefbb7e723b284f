"""How work reaches the nodes: the scheduler holds compute, then each run goes to its node's queue."""

import logging

from django.db import transaction

from pool.scheduler import schedule

log = logging.getLogger(__name__)


def schedule_and_dispatch() -> int:
    """One scheduler pass; each new hold's run is queued to its node once the holds are committed."""
    with transaction.atomic():
        holds = schedule()
        for hold in holds:
            job_id, queue = str(hold.job_id), hold.node.queue
            transaction.on_commit(lambda j=job_id, q=queue: dispatch_run(j, q))
    return len(holds)


def dispatch_run(job_id, queue: str) -> None:
    """Send a held job's run to its node's queue."""
    from jobs.tasks import run_job

    run_job.apply_async(args=[str(job_id)], queue=queue)


def request_schedule() -> None:
    """Ask for a scheduler pass after the current transaction commits (a submit, a release)."""
    from jobs.tasks import schedule_jobs

    transaction.on_commit(lambda: _safe_delay(schedule_jobs))


def _safe_delay(task) -> None:
    # The broker only nudges: if it is down, the periodic pass still finds the work.
    try:
        task.delay()
    except Exception:
        log.exception("could not queue %s; the periodic pass will catch up", task.name)
