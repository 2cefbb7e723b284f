"""The node's side of a job: RUN and OUTPUT on the held compute, then RELEASE.

Called by the Celery task of the node the job is held on; safe to call twice for one job, and
again after the process that ran it died (it takes the run over).
"""

import logging
import os
import time
import uuid
from functools import partial

from django.conf import settings
from django.utils import timezone

from accounting.meter import Usage
from accounting.rates import meter_stop_bound, overhead_s
from jobs import actions
from jobs.models import Isolation, Job, Outcome, OutputFile, Stage
from jobs.transitions import InvalidTransition
from pool.models import Hold
from worker import database, outputs
from worker.logpump import LogPump
from worker.runlock import RunLock
from worker.sandbox import Exit, RunSpec, Sandbox, get_sandbox
from worker.scratch import Scratch

log = logging.getLogger(__name__)
POLL_S = 0.5
KILL_GRACE_S = 60
KILLED = 128 + 9  # the exit code of a main process killed by SIGKILL (as the OOM killer does)
# Collection ends by the hold's metered bound (accounting.rates.meter_stop_bound) less this, so the
# release fits in the bound too; but a run the node started late still gets this long to collect:
# the meter stops at the bound anyway, so the team does not pay for it.
RELEASE_MARGIN_S = 5
COLLECT_AT_LEAST_S = 10
# A second delivery waits this long for the run's lock (the watchdog's look takes it for a moment).
LOCK_WAIT_S = 5
# How long the end of a run (finish, collect, release) waits for a database that is away.
DATABASE_WAIT_S = 300
LOST_TRACK = "the node lost track of the run: its container is gone"

Outcomes = tuple[str, int | None, str, Usage]  # outcome (an Outcome's value), exit code, reason, usage


def job_uid(cpu_set: list[int]) -> int:
    """The uid of a run: as root, one of its own from the range, base + its first held core, so two
    runs at once on a node (never sharing a core) never share a uid, nor the kernel's per-uid limits
    (processes, inotify watches, message queues, keys); otherwise this (non-root) worker's uid."""
    if os.geteuid() != 0:
        return os.geteuid()
    return settings.E31_JOB_UID_BASE + min(cpu_set, default=0) % settings.E31_JOB_UID_COUNT


def runtime_for(job: Job) -> str:
    """The container runtime of the job's isolation (docs/isolation.md)."""
    return settings.E31_STRONG_RUNTIME if job.isolation == Isolation.STRONG else settings.E31_RUNTIME


def run_key(job: Job) -> str:
    """One run of a job: its id and attempt (as the sandbox names the run's container and cgroup)."""
    return f"{job.pk}-{job.attempt}"


def run(job_id: uuid.UUID | str, *, node_name: str) -> None:
    """Run a held job on this node, collect its outputs and release it.

    1. Take the run's lock (worker.runlock): a second delivery while the run is watched stops here.
    2. Claim the run (rent → run); a cancelled or released job stops here. A run already in RUN or
       OUTPUT whose lock was free lost its watcher (the pool process was killed): take it over.
    3. Stage the data into a private scratch folder and start the container on the held cores.
    4. Watch it: time limit, cancel, output size; pump its log to the database.
    5. Decide the outcome (run → output), collect outputs and the log into the store.
    6. Release (the record is written), then remove the container, the scratch folder and the lock.
    """
    job = database.once_more(lambda: Job.objects.select_related("image", "team").filter(pk=job_id).first())
    if job is None:
        return
    hold = job.active_hold
    if hold is None or hold.node.name != node_name:
        log.warning("job %s is not held on node %s; ignoring", job_id, node_name)
        return
    lock = RunLock(run_key(job))
    if not lock.acquire(timeout=LOCK_WAIT_S):
        log.info("job %s: its run is watched by another process of this node; ignoring", job_id)
        return
    over = False
    try:
        over = _run_locked(job, hold)
    finally:
        lock.release(remove=over)


def _run_locked(job: Job, hold: Hold) -> bool:
    """The run, once its lock is ours; True when it is over (released, here or by someone else)."""
    runtimes = get_sandbox().runtimes()
    if not actions.settle_isolation(
        job, now=timezone.now(), strong_runtime=settings.E31_STRONG_RUNTIME, node_runtimes=runtimes
    ):
        return True  # rejected: the node cannot run it as its team or image requires
    if actions.start_run(job, now=timezone.now(), runtime=runtime_for(job)):
        return _run(job, hold)
    job.refresh_from_db()
    if job.stage in (Stage.RUN, Stage.OUTPUT) and job.attempt == hold.attempt and job.active_hold == hold:
        return _take_over(job, hold)
    return job.stage == Stage.RELEASE or job.attempt != hold.attempt


def _run(job: Job, hold: Hold) -> bool:
    sandbox = get_sandbox()
    scratch = Scratch(job.pk, uid=job_uid(hold.cpu_set))
    handle = None
    outcome: str  # an Outcome's value, as _watch and _collect return it
    outcome, exit_code, reason, usage = Outcome.FAILED, None, "", Usage()
    try:
        scratch.prepare(job.data_files.all())
        handle = sandbox.run(_spec(job, hold, scratch))
        pump = LogPump(sandbox.logs(handle), scratch.log, job.pk)
        outcome, exit_code, reason, usage = _follow(job, sandbox, handle, scratch, pump)
    except Exception as exc:
        log.exception("run of job %s failed", job.pk)
        outcome, reason = Outcome.FAILED, f"the node could not run the job: {exc}"
    finally:
        if handle is not None:
            sandbox.stop(handle)
    return _finish(job, sandbox, handle, scratch, (outcome, exit_code, reason, usage))


def _take_over(job: Job, hold: Hold) -> bool:
    """Finish a run whose watcher died: the process running it was killed, its lock went with it.

    Its container (found by its labels) is followed to its end, under the same time limit counted
    from the run's start, its log pumped on from where it stopped; then the run ends as any other.
    A container that is gone ends the run as failed, with what its scratch folder holds. A run that
    was already at OUTPUT is collected again (collection may be repeated) and released.
    """
    sandbox = get_sandbox()
    scratch = Scratch(job.pk, uid=job_uid(hold.cpu_set))
    handle = sandbox.find(node=hold.node.name, run_key=run_key(job))
    log.warning(
        "job %s: the process watching its run (at %s) is gone; taking the run over (container %s)",
        job.pk, job.stage, handle or "gone",
    )  # fmt: skip
    if job.stage == Stage.OUTPUT:
        ended: Outcomes = (job.outcome, job.exit_code, job.reason, _used(sandbox, handle, job))
    elif handle is None:
        ended = (Outcome.FAILED, None, LOST_TRACK, _used(sandbox, handle, job))
    else:
        try:
            pump = LogPump(sandbox.logs(handle), scratch.log, job.pk, resume=True)
            ended = _follow(job, sandbox, handle, scratch, pump)
        except Exception as exc:
            log.exception("following the run of job %s failed", job.pk)
            ended = (Outcome.FAILED, None, f"the node could not follow the job's run: {exc}", Usage())
        finally:
            sandbox.stop(handle)
    return _finish(job, sandbox, handle, scratch, ended)


def _follow(job: Job, sandbox: Sandbox, handle: str, scratch: Scratch, pump: LogPump) -> Outcomes:
    """Watch the container to its end; what it used is read once it is gone."""
    outcome, exit_code, reason = _watch(job, sandbox, handle, scratch, pump)
    database.once_more(pump.finish)
    return outcome, exit_code, reason, _used(sandbox, handle, job)


def _used(sandbox: Sandbox, handle: str | None, job: Job) -> Usage:
    """What the run used: read from its container, or from what outlived a container that is gone."""
    metered = sandbox.usage(handle) if handle is not None else sandbox.forget(run_key(job))
    return Usage(cpu_seconds=metered.cpu_seconds, memory_peak_mb=metered.memory_peak_mb)


def _finish(job: Job, sandbox: Sandbox, handle: str | None, scratch: Scratch, ended: Outcomes) -> bool:
    """run → output → release, then the container and the scratch folder are removed.

    Each step may be done again by a run that takes this one over, should this process die between
    two of them: the move to OUTPUT is kept, collection replaces what an earlier one stored, and a
    release happens once. A database that is away is waited for (DATABASE_WAIT_S); if it does not
    come back the error is raised and the container and the scratch folder are kept for a takeover.
    """
    outcome, exit_code, reason, usage = ended
    wait = DATABASE_WAIT_S
    try:
        database.retrying(
            lambda: _finish_run(job, outcome, exit_code, reason), what=f"finishing the run of {job.pk}", for_s=wait
        )
        try:
            outcome, reason = database.retrying(
                lambda: collect(job, scratch, outcome, reason), what=f"collecting the outputs of {job.pk}", for_s=wait
            )
        except (*database.DROPPED, InvalidTransition):  # the database away, or the run released elsewhere
            raise
        except Exception as exc:
            # Whatever the job left behind, the hold must still be released and its record written.
            log.exception("collecting the outputs of job %s failed", job.pk)
            outcome = Outcome.FAILED
            reason = "; ".join(part for part in [reason, f"its outputs could not be collected: {exc}"] if part)
        database.retrying(
            lambda: actions.release(
                job, outcome=outcome, reason=escape_undecodable(reason), exit_code=exit_code, now=timezone.now(),
                usage=usage, attempt=job.attempt,
            ),
            what=f"releasing {job.pk}",
            for_s=wait,
        )  # fmt: skip
    except InvalidTransition:
        log.info("job %s was released by someone else (node lost?)", job.pk)
    if handle is not None:
        sandbox.remove(handle)
    scratch.remove()
    return True


def _finish_run(job: Job, outcome: str, exit_code: int | None, reason: str) -> None:
    """run → output, unless this run is there already (taken over at OUTPUT, or an earlier try went
    through before its connection dropped)."""
    if Job.objects.filter(pk=job.pk, attempt=job.attempt, stage=Stage.OUTPUT).exists():
        return
    actions.finish_run(job, outcome=outcome, exit_code=exit_code, reason=reason, now=timezone.now())


def collection_deadline(job: Job) -> float:
    """When (time.monotonic) the collection of the job's outputs must stop: the hold's metered bound
    less the release's margin, at least COLLECT_AT_LEAST_S from now."""
    bound = meter_stop_bound(job.held_at or timezone.now(), job.time_limit_s)
    left = (bound - timezone.now()).total_seconds() - RELEASE_MARGIN_S
    return time.monotonic() + max(left, COLLECT_AT_LEAST_S)


def _spec(job: Job, hold: Hold, scratch: Scratch) -> RunSpec:
    return RunSpec(
        job_id=str(job.pk),
        node=hold.node.name,
        image=job.image.reference,
        command=list(job.command),
        env={str(k): str(v) for k, v in job.env.items()},
        cpu_set=list(hold.cpu_set),
        memory_mb=hold.memory_mb,
        gpu_ids=list(hold.gpu_ids),
        data_dir=scratch.data,
        output_dir=scratch.output,
        uid=scratch.uid,
        pids_limit=settings.E31_PIDS_LIMIT,
        tmpfs_mb=settings.E31_TMPFS_MB,
        attempt=job.attempt,
        runtime=runtime_for(job),
    )


def _watch(job: Job, sandbox: Sandbox, handle: str, scratch: Scratch, pump: LogPump) -> tuple[str, int | None, str]:
    """Poll the container until it exits; kill it at its time limit, on cancel, over the output cap,
    or when the run was taken away from this node.

    The time limit counts from the run's start (`started_at`), so a run taken over late is killed at
    the same moment its first watcher would have killed it. A database that is away does not stop
    the watch: the log waits in the scratch file and the time limit is kept without it.
    """
    elapsed = (timezone.now() - job.started_at).total_seconds() if job.started_at else 0.0
    deadline = time.monotonic() + job.time_limit_s - elapsed
    stopped_for: tuple[str, str] | None = None
    stopped_at = 0.0
    cancel_requested: bool | None = False
    database_away = False
    while True:
        exited = sandbox.wait(handle, timeout=POLL_S)
        try:
            database.once_more(pump.flush)
            # One query a poll: is the run still this worker's (not released by the reaper, not a new
            # attempt elsewhere), and was it cancelled? (None: no longer ours.)
            cancel_requested = database.once_more(lambda: _cancel_requested(job))
            database_away = False
        except database.DROPPED as exc:
            if not database_away:
                log.warning("job %s: the database is unreachable while its run is watched: %s", job.pk, exc)
            database_away = True
        if exited is not None:
            return _outcome(job, exited, stopped_for)
        if stopped_for is not None:
            if time.monotonic() - stopped_at > KILL_GRACE_S:
                raise RuntimeError(f"the container did not stop within {KILL_GRACE_S}s of being killed")
            continue
        if not database_away and cancel_requested is None:
            stopped_for = (Outcome.NODE_LOST, "the run was taken away from this node")
        elif time.monotonic() >= deadline:
            stopped_for = (Outcome.TIMED_OUT, f"ran past its time limit of {job.time_limit_s}s and was killed")
        elif not database_away and cancel_requested:
            stopped_for = (Outcome.CANCELLED, "cancelled while running")
        elif not scratch.confined and scratch.output_bytes() > settings.E31_OUTPUT_TOTAL_MAX_BYTES:
            # Only without root: otherwise /output is a tmpfs of the cap's size and the kernel holds it.
            cap = settings.E31_OUTPUT_TOTAL_MAX_BYTES
            stopped_for = (Outcome.FAILED, f"wrote more than the output cap of {cap} bytes and was killed")
        if stopped_for is not None:
            stopped_at = time.monotonic()
            sandbox.stop(handle)


def _cancel_requested(job: Job) -> bool | None:
    """Whether a cancel was asked for this run; None when the run is no longer in RUN in this attempt."""
    state = Job.objects.filter(pk=job.pk, stage=Stage.RUN, attempt=job.attempt)
    return state.values_list("cancel_requested", flat=True).first()


def _outcome(job: Job, exited: Exit, stopped_for: tuple[str, str] | None) -> tuple[str, int | None, str]:
    if stopped_for is not None:
        return stopped_for[0], exited.exit_code, stopped_for[1]
    if exited.oom_killed:
        if exited.exit_code not in (None, KILLED):
            # The engine flags a container when any of its processes was killed, not only the main one.
            killed = f"a process of the job was killed by the memory limit of {job.memory_mb} MB"
            return Outcome.OUT_OF_MEMORY, exited.exit_code, f"{killed}; the main process exited {exited.exit_code}"
        return Outcome.OUT_OF_MEMORY, exited.exit_code, f"killed by the memory limit of {job.memory_mb} MB"
    if exited.exit_code == 0:
        return Outcome.SUCCEEDED, 0, ""
    return Outcome.FAILED, exited.exit_code, f"exited with code {exited.exit_code}"


def collect(job: Job, scratch: Scratch, outcome: str, reason: str) -> tuple[str, str]:
    """Read the job's /output and hand it to jobs.actions.collect_outputs, which keeps what the team's
    quota allows and has this node copy it into the store (`_copy`)."""
    deadline = collection_deadline(job)
    found = actions.Found(failures=[scratch.output_full()])  # a cap the kernel held the job to
    if outcome == Outcome.OUT_OF_MEMORY and (held := scratch.output_memory_mb()):
        found.notes.append(f"its files under /output held {held} MB of that memory")
    collection = outputs.Collection()
    try:
        if scratch.output.is_dir():
            limits = outputs.Limits(
                settings.E31_OUTPUT_FILE_MAX_BYTES, settings.E31_OUTPUT_TOTAL_MAX_BYTES, settings.E31_OUTPUT_MAX_FILES
            )
            collection = outputs.collect(scratch.output, job.output_patterns, limits)
    except Exception:
        log.exception("reading the outputs of job %s failed", job.pk)
        found.failures.append("its outputs could not all be collected: the node failed while reading them")
    found.rows = [OutputFile(job=job, path=c.path, size=c.size, sha256=c.sha256) for c in collection.files]
    found.refused = collection.refused
    found.failures.append(collection.over_cap)
    if sparse := outputs.sparse_note(collection.files):
        found.log_only.append(sparse)
    copy = partial(_copy, job, collection.files, deadline)
    return actions.collect_outputs(job, outcome=outcome, reason=reason, found=found, copy=copy, now=timezone.now())


def _copy(job: Job, files: list[outputs.Collected], deadline: float) -> actions.Copied:
    """Copy the kept outputs into the store, each refused by itself if it fails, until the deadline."""
    copied = actions.Copied()
    for kept, collected in enumerate(files):
        if time.monotonic() > deadline:
            copied.not_stored += [c.path for c in files[kept:]]
            copied.failure = (
                f"its outputs were not all collected within its hold's bound (its time limit and {overhead_s()}s): "
                f"{len(files) - kept} of {len(files)} not kept, from {outputs.shown(collected.path)} on"
            )
            break
        try:
            outputs.store(job.pk, collected)
        except Exception as exc:
            log.warning("job %s: output %r was not stored", job.pk, collected.path, exc_info=True)
            copied.refused.append(f"{outputs.shown(collected.path)} (not stored: {outputs.in_job_terms(exc)})")
            copied.not_stored.append(collected.path)
    return copied


def escape_undecodable(text: str) -> str:
    """`text` with the bytes of non-UTF-8 file names (read as surrogates) escaped, as the database needs."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
