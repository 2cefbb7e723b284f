"""The node's watchdog, run by its heartbeat thread: the one place a run no process watches is sent again
(harmless: a second delivery finds the lock taken), and what runs that are over left is removed."""

import logging
import os
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings

from jobs.models import Job, Stage
from jobs.scheduling.dispatch import dispatch_run
from pool.models import Hold, Node
from worker import runlock
from worker.sandbox import run_key
from worker.scratch import remove_folder

log = logging.getLogger(__name__)

# A folder or lock file younger than this may belong to a run that is only starting.
SCRATCH_LEFT_AFTER_S = 60.0
LOCK_LEFT_AFTER_S = 3600.0

_sent: dict[str, float] = {}  # run key → when this process last sent the run again (monotonic clock)


def look_after_runs(node: Node, *, now: datetime) -> list[str]:
    """Send again, at most every E31_RESEND_AFTER_S, the runs here no process watches; return their keys."""
    after_s = settings.E31_RESEND_AFTER_S
    # Two queries, not a join, which could deadlock with a TRUNCATE of both tables (the tests' flush).
    held_here = list(Hold.objects.filter(node=node, released_at__isnull=True).values_list("job_id", flat=True))
    live = Job.objects.held().filter(pk__in=held_here)
    held = live.values_list("pk", "attempt", "stage", "held_at")
    active: dict[str, str] = {}
    sent = []
    for job_id, attempt, stage, held_at in held:
        key = run_key(job_id, attempt)
        active[str(job_id)] = key
        if runlock.is_watched(key):
            continue
        if stage == Stage.RENT and (held_at is None or now - held_at < timedelta(seconds=after_s)):
            continue  # its message is on its way
        if time.monotonic() - _sent.get(key, float("-inf")) < after_s:
            continue
        what = "has not started" if stage == Stage.RENT else f"is at {stage} with no process watching it"
        log.warning("job %s, held on this node, %s: sending its run again", job_id, what)
        try:
            dispatch_run(job_id, node.queue)
        except Exception:
            log.exception("could not send the run of job %s again; the next heartbeat tries again", job_id)
            continue
        _sent[key] = time.monotonic()
        sent.append(key)
    for key in set(_sent) - set(active.values()):
        del _sent[key]
    _remove_leftovers(active)
    return sent


def _remove_leftovers(active: dict[str, str]) -> None:
    """Scratch folders (staged data, outputs) and lock files of runs that are over here."""
    root = Path(settings.E31_SCRATCH_DIR)
    wall = time.time()
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return
    for entry in entries:
        if not _is_job_id(entry.name) or entry.name in active or not entry.is_dir(follow_symlinks=False):
            continue
        if wall - entry.stat(follow_symlinks=False).st_mtime < SCRATCH_LEFT_AFTER_S:
            continue
        if any(runlock.is_watched(path.stem) for path in runlock.lock_dir().glob(f"{entry.name}-*.lock")):
            continue
        log.warning("removing the scratch folder of job %s: its run here is over", entry.name)
        remove_folder(Path(entry.path))
    for key in runlock.stale(older_than_s=LOCK_LEFT_AFTER_S, now=wall):
        if key.rpartition("-")[0] not in active:
            runlock.unlink_if_unwatched(key)


def _is_job_id(name: str) -> bool:
    try:
        uuid.UUID(name)
    except ValueError:
        return False
    return True
