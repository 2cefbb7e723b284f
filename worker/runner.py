"""The node's side of a job: RUN and OUTPUT on the held compute, then RELEASE; safe to call twice, and
again after the process that ran it died (it takes the run over)."""

import logging
import os
import time
import uuid
from dataclasses import dataclass
from functools import partial

from django.conf import settings
from django.utils import timezone

from accounting.meter import Usage
from accounting.rates import meter_stop_bound, overhead_s
from jobs.lifecycle import actions
from jobs.lifecycle.history import Actor
from jobs.lifecycle.inputs import kept_outputs, staged_files
from jobs.lifecycle.usage import clear_usage
from jobs.models import STARTED_STAGES, Isolation, Job, Outcome, OutputFile, Stage
from jobs.storage.store import StoreUnavailable
from jobs.transitions import InvalidTransition
from pool.models import Hold
from pool.nodes import engine_silent
from worker import database, outputs
from worker.logpump import LogPump
from worker.runlock import RunLock
from worker.sampler import Sampler
from worker.sandbox import ENGINE_GONE, EngineGone, Exit, RunSpec, Sandbox, get_sandbox, run_key
from worker.sandbox.base import ENGINE_PING_S, KILLED
from worker.scratch import Scratch

log = logging.getLogger(__name__)
POLL_S = 0.5
KILL_GRACE_S = 60
# Collection stops this long before the hold's metered bound, so the release fits in it too.
RELEASE_MARGIN_S = 5
COLLECT_AT_LEAST_S = 10  # past the bound the meter has stopped, so a late run still gets this long
LOCK_WAIT_S = 5  # a second delivery waits this long for the run's lock, which the watchdog takes briefly
DATABASE_WAIT_S = 300  # how long the end of a run waits for a database that is away
LOST_TRACK = "the node lost track of the run: its container is gone"

Outcomes = tuple[str, int | None, str, Usage]  # outcome (an Outcome's value), exit code, reason, usage


def job_uid(cpu_set: list[int]) -> int:
    """As root, base + its first held core, so two runs at once never share the kernel's per-uid limits."""
    if os.geteuid() != 0:
        return os.geteuid()
    return settings.E31_JOB_UID_BASE + min(cpu_set, default=0) % settings.E31_JOB_UID_COUNT


def runtime_for(job: Job) -> str:
    return settings.E31_STRONG_RUNTIME if job.isolation == Isolation.STRONG else settings.E31_RUNTIME


def run(job_id: uuid.UUID | str, *, node_name: str) -> None:
    """Run a held job on this node, collect its outputs and release it.

    1. Take the run's lock (worker.runlock): a second delivery while the run is watched stops here.
    2. Claim the run (rent → run), or take over a run in RUN or OUTPUT whose watcher died.
    3. Stage the data into a private scratch folder and start the container on the held cores.
    4. Watch it: time limit, cancel, output size; pump its log to the database.
    5. Decide the outcome (run → output), collect outputs and the log into the store.
    6. Release, then remove the container, the scratch folder and the lock.
    """
    job = database.once_more(lambda: Job.objects.select_related("image", "team").filter(pk=job_id).first())
    if job is None:
        return
    hold = job.active_hold
    if hold is None or hold.node.name != node_name:
        log.warning("job %s is not held on node %s; ignoring", job_id, node_name)
        return
    lock = RunLock(run_key(job.pk, job.attempt))
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
    scratch = Scratch(job.pk, uid=job_uid(hold.cpu_set))
    try:
        runtimes = get_sandbox().runtimes()
    except EngineGone:
        # Held (or left by a watcher that died) while the engine was away: lost, as a run it was running.
        return _lose(job, get_sandbox(), None, scratch)
    strong = settings.E31_STRONG_RUNTIME
    if not actions.settle_isolation(job, now=timezone.now(), strong_runtime=strong, node_runtimes=runtimes):
        return True  # rejected: the node cannot run it as its team or image requires
    if actions.start_run(job, now=timezone.now(), runtime=runtime_for(job), node=hold.node.name):
        return _run(job, hold, scratch)
    job.refresh_from_db()
    if job.stage in STARTED_STAGES and job.attempt == hold.attempt and job.active_hold == hold:
        return _take_over(job, hold, scratch)
    return job.stage == Stage.RELEASE or job.attempt != hold.attempt


def _run(job: Job, hold: Hold, scratch: Scratch) -> bool:
    sandbox = get_sandbox()
    handle = None
    outcome: str  # an Outcome's value, as _watch and collect return it
    outcome, exit_code, reason, usage = Outcome.FAILED, None, "", Usage()
    # The run is claimed: a database that drops before the watch begins is waited for, not a failed run.
    waiting = partial(database.retrying, for_s=DATABASE_WAIT_S)
    try:
        scratch.prepare(waiting(lambda: staged_files(job), what=f"reading the data files of {job.pk}"))
        scratch.restore_outputs(waiting(lambda: kept_outputs(job), what=f"reading the kept outputs of {job.pk}"))
        handle = sandbox.run(_spec(job, hold, scratch))
        stream = sandbox.logs(handle)
        pump = waiting(lambda: LogPump(stream, scratch.log, job.pk), what=f"starting the log of {job.pk}")
        outcome, exit_code, reason, usage = _follow(job, sandbox, handle, scratch, pump)
    except Exception as exc:
        log.exception("run of job %s failed", job.pk)
        outcome, reason = Outcome.FAILED, f"the node could not run the job: {exc}"
        if not sandbox.answers(ENGINE_PING_S):
            outcome, reason = Outcome.NODE_LOST, ENGINE_GONE
            sandbox.kill_run(run_key(job.pk, job.attempt))
    finally:
        if handle is not None:
            sandbox.stop(handle)
    return _finish(job, sandbox, handle, scratch, (outcome, exit_code, reason, usage))


def _take_over(job: Job, hold: Hold, scratch: Scratch) -> bool:
    """Finish a run whose watcher died: follow its container, fail it if gone, collect again at OUTPUT."""
    sandbox = get_sandbox()
    handle = sandbox.find(node=hold.node.name, run_key=run_key(job.pk, job.attempt))
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
            stream = sandbox.logs(handle)
            pump = database.retrying(
                lambda: LogPump(stream, scratch.log, job.pk, resume=True),
                what=f"resuming the log of {job.pk}", for_s=DATABASE_WAIT_S,
            )  # fmt: skip
            ended = _follow(job, sandbox, handle, scratch, pump)
        except Exception as exc:
            log.exception("following the run of job %s failed", job.pk)
            ended = (Outcome.FAILED, None, f"the node could not follow the job's run: {exc}", Usage())
        finally:
            sandbox.stop(handle)
    return _finish(job, sandbox, handle, scratch, ended)


def _follow(job: Job, sandbox: Sandbox, handle: str, scratch: Scratch, pump: LogPump) -> Outcomes:
    """Watch the container to its end; an engine that stops answering loses the run, killed by its cgroup."""
    try:
        outcome, exit_code, reason = _watch(job, sandbox, handle, scratch, pump)
    except EngineGone:
        log.error("job %s: %s; its run is lost", job.pk, ENGINE_GONE)
        killed = sandbox.kill_run(run_key(job.pk, job.attempt))
        log.warning("job %s: killed %d processes of its run through its cgroup", job.pk, killed)
        database.once_more(pump.finish)
        used = sandbox.forget(run_key(job.pk, job.attempt))
        return Outcome.NODE_LOST, None, ENGINE_GONE, Usage(used.cpu_seconds, used.memory_peak_mb)
    database.once_more(pump.finish)
    return outcome, exit_code, reason, _used(sandbox, handle, job)


def _used(sandbox: Sandbox, handle: str | None, job: Job) -> Usage:
    metered = sandbox.usage(handle) if handle is not None else sandbox.forget(run_key(job.pk, job.attempt))
    return Usage(cpu_seconds=metered.cpu_seconds, memory_peak_mb=metered.memory_peak_mb)


def _finish(job: Job, sandbox: Sandbox, handle: str | None, scratch: Scratch, ended: Outcomes) -> bool:
    """run → output → release, then cleanup; a database away past DATABASE_WAIT_S raises, for a takeover."""
    outcome, exit_code, reason, usage = ended
    if outcome == Outcome.NODE_LOST and reason == ENGINE_GONE:
        return _lose(job, sandbox, handle, scratch, usage)
    retried = partial(database.retrying, for_s=DATABASE_WAIT_S)
    try:
        retried(lambda: _finish_run(job, outcome, exit_code, reason), what=f"finishing the run of {job.pk}")
        try:
            collected = retried(lambda: collect(job, scratch, outcome, reason), what=f"collecting {job.pk}")
            outcome, reason, log_notes = collected
        except (*database.DROPPED, InvalidTransition):  # the database away, or the run released elsewhere
            raise
        except Exception as exc:
            # Whatever the job left behind, the hold must still be released and its record written.
            log.exception("collecting the outputs of job %s failed", job.pk)
            outcome = Outcome.FAILED
            reason = "; ".join(part for part in [reason, f"its outputs could not be collected: {exc}"] if part)
            log_notes = []
        reason = escape_undecodable(reason)
        release = partial(
            actions.release, job, outcome=outcome, reason=reason, exit_code=exit_code, log_notes=log_notes
        )
        retried(lambda: release(usage=usage, attempt=job.attempt, now=timezone.now()), what=f"releasing {job.pk}")
    except InvalidTransition:
        log.info("job %s was released by someone else (node lost?)", job.pk)
    if handle is not None:
        sandbox.remove(handle)
    # A job its retry rules sent back to the queue may already be starting its next attempt here, in this
    # folder: that run's prepare removes what is left, or the watchdog does once no run of it is here.
    if job.stage != Stage.SUBMIT:
        scratch.remove()
    return True


def _lose(job: Job, sandbox: Sandbox, handle: str | None, scratch: Scratch, usage: Usage | None = None) -> bool:
    """Release the run as lost with the engine, as the reaper does; its container goes when the engine is back."""
    node = settings.E31_NODE_NAME
    lose = partial(
        actions.release_lost, job, node_name=node, now=timezone.now(), actor=Actor.node(node), reason=ENGINE_GONE,
        usage=usage,
    )  # fmt: skip
    try:
        database.once_more(lambda: clear_usage(job.pk))
        # No pass may put the retry back on this engine before the next heartbeat finds it silent.
        database.once_more(lambda: engine_silent(node, now=timezone.now()))
        lost = database.retrying(
            lambda: lose(last_heartbeat=timezone.now()), for_s=DATABASE_WAIT_S, what=f"losing {job.pk}"
        )
    except InvalidTransition:
        log.info("job %s was released by someone else", job.pk)
        return True
    if handle is not None:
        sandbox.remove(handle)
    if lost.stage != Stage.SUBMIT:
        scratch.remove()
    return True


def _finish_run(job: Job, outcome: str, exit_code: int | None, reason: str) -> None:
    """run → output, unless a takeover or an earlier try whose connection dropped got there already."""
    now, node = timezone.now(), settings.E31_NODE_NAME
    try:
        actions.finish_run(job, outcome=outcome, exit_code=exit_code, reason=reason, now=now, node=node)
    except InvalidTransition:
        if not Job.objects.filter(pk=job.pk, attempt=job.attempt, stage=Stage.OUTPUT).exists():
            raise


def collection_deadline(job: Job) -> float:
    """When (time.monotonic) collecting the job's outputs must stop: before the hold's metered bound."""
    bound = meter_stop_bound(job.held_at or timezone.now(), job.time_limit_s)
    left = (bound - timezone.now()).total_seconds() - RELEASE_MARGIN_S
    return time.monotonic() + max(left, COLLECT_AT_LEAST_S)


def _spec(job: Job, hold: Hold, scratch: Scratch) -> RunSpec:
    return RunSpec(
        job_id=str(job.pk), node=hold.node.name, image=job.image.reference, command=list(job.command),
        env={str(k): str(v) for k, v in job.env.items()}, cpu_set=list(hold.cpu_set), memory_mb=hold.memory_mb,
        gpu_ids=list(hold.gpu_ids), data_dir=scratch.data, output_dir=scratch.output, uid=scratch.uid,
        pids_limit=settings.E31_PIDS_LIMIT, tmpfs_mb=settings.E31_TMPFS_MB, attempt=job.attempt,
        runtime=runtime_for(job),
    )  # fmt: skip


def _watch(job: Job, sandbox: Sandbox, handle: str, scratch: Scratch, pump: LogPump) -> tuple[str, int | None, str]:
    """Poll the container until it exits; kill it at its time limit (from `started_at`, for takeovers), on
    cancel, over the output cap or when taken away; a preempted run gets SIGTERM and E31_PREEMPT_GRACE_S."""
    elapsed = (timezone.now() - job.started_at).total_seconds() if job.started_at else 0.0
    deadline = time.monotonic() + job.time_limit_s - elapsed
    stopped_for: tuple[str, str] | None = None
    stopped_at = 0.0
    kill_at: float | None = None  # a preempted run's end of grace
    asked: Asked | None = Asked()
    database_away = False
    sampler = Sampler(sandbox, job)
    while True:
        exited = sandbox.wait(handle, timeout=POLL_S)
        try:
            database.once_more(pump.flush)
            # One query a poll: was the run cancelled or preempted, or (None) is it no longer this node's?
            asked = database.once_more(lambda: _asked(job))
            database_away = False
        except database.DROPPED as exc:
            if not database_away:
                log.warning("job %s: the database is unreachable while its run is watched: %s", job.pk, exc)
            database_away, asked = True, Asked()  # nothing is known to be asked while it is away
        if exited is not None:
            return _outcome(job, exited, stopped_for)
        if kill_at is not None:
            if asked is None:  # its next attempt may run elsewhere: no grace
                stopped_for = (Outcome.NODE_LOST, "the run was taken away from this node")
            if asked is None or asked.cancel or time.monotonic() >= min(kill_at, deadline):
                kill_at, stopped_at = None, time.monotonic()
                sandbox.stop(handle)
            continue
        if stopped_for is not None:
            if time.monotonic() - stopped_at > KILL_GRACE_S:
                raise RuntimeError(f"the container did not stop within {KILL_GRACE_S}s of being killed")
            continue
        if asked is None:
            stopped_for = (Outcome.NODE_LOST, "the run was taken away from this node")
        elif time.monotonic() >= deadline:
            stopped_for = (Outcome.TIMED_OUT, f"ran past its time limit of {job.time_limit_s}s and was killed")
        elif asked.cancel:
            stopped_for = (Outcome.CANCELLED, "cancelled while running")
        elif asked.preempted_by is not None:
            stopped_for = (Outcome.PREEMPTED, f"preempted by job {asked.preempted_by}")
            kill_at = time.monotonic() + settings.E31_PREEMPT_GRACE_S
            log.info("job %s: preempted by job %s; SIGTERM, then a kill in %ss", job.pk, asked.preempted_by,
                     settings.E31_PREEMPT_GRACE_S)  # fmt: skip
            sandbox.terminate(handle)
            continue
        elif not scratch.confined and scratch.output_bytes() > settings.E31_OUTPUT_TOTAL_MAX_BYTES:
            # Only without root: otherwise /output is a tmpfs of the cap's size and the kernel holds it.
            cap = settings.E31_OUTPUT_TOTAL_MAX_BYTES
            stopped_for = (Outcome.FAILED, f"wrote more than the output cap of {cap} bytes and was killed")
        if stopped_for is not None:
            stopped_at = time.monotonic()
            sandbox.stop(handle)
        elif not database_away:
            sampler.poll()


@dataclass(frozen=True)
class Asked:
    """What was asked of a run while it runs: a cancel, or to give its compute to another job."""

    cancel: bool = False
    preempted_by: uuid.UUID | None = None


def _asked(job: Job) -> Asked | None:
    """None when the run is no longer in RUN in this attempt."""
    state = Job.objects.filter(pk=job.pk, stage=Stage.RUN, attempt=job.attempt)
    found = state.values_list("cancel_requested", "preempted_by_id").first()
    return Asked(*found) if found is not None else None


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


def collect(job: Job, scratch: Scratch, outcome: str, reason: str) -> tuple[str, str, list[str]]:
    """Read /output and hand it to actions.collect_outputs, which keeps what the quota allows."""
    deadline = collection_deadline(job)
    found = actions.FoundOutputs(failures=[scratch.output_full()])  # a cap the kernel held the job to
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


def _copy(job: Job, files: list[outputs.Collected], deadline: float) -> actions.CopyShortfall:
    copied = actions.CopyShortfall()
    for kept, collected in enumerate(files):
        if time.monotonic() > deadline:
            why = f"its outputs were not all collected within its hold's bound (its time limit and {overhead_s()}s)"
        else:
            try:
                outputs.store(job.pk, collected)
                continue
            except StoreUnavailable as exc:  # the store is away: the rest would fail the same way
                why = f"its outputs could not all be kept, {exc}"
            except Exception as exc:
                log.warning("job %s: output %r was not stored", job.pk, collected.path, exc_info=True)
                copied.refused.append(f"{outputs.shown(collected.path)} (not stored: {outputs.in_job_terms(exc)})")
                copied.not_stored.append(collected.path)
                continue
        copied.not_stored += [c.path for c in files[kept:]]
        left = f"{len(files) - kept} of {len(files)} not kept, from {outputs.shown(collected.path)} on"
        copied.failure = f"{why}: {left}"
        break
    return copied


def escape_undecodable(text: str) -> str:
    """`text` with the bytes of non-UTF-8 file names (read as surrogates) escaped for the database."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
