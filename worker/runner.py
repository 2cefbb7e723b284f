"""The node's side of a job: RUN and OUTPUT on the held compute, then RELEASE.

Called by the Celery task of the node the job is held on; safe to call twice for one job.
"""

import logging
import os
import time
import uuid

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounting.meter import Usage
from jobs import actions, logs
from jobs.models import Job, Outcome, OutputFile, Stage
from jobs.transitions import InvalidTransition
from pool.models import Hold
from worker import outputs
from worker.logpump import LogPump
from worker.sandbox import Exit, RunSpec, Sandbox, get_sandbox
from worker.scratch import Scratch

log = logging.getLogger(__name__)
POLL_S = 0.5
KILL_GRACE_S = 60


def job_uid() -> int:
    # As root the job gets its own unprivileged uid; otherwise it runs as this (non-root) user.
    return settings.E31_JOB_UID if os.geteuid() == 0 else os.geteuid()


def run(job_id: uuid.UUID | str, *, node_name: str) -> None:
    """Run a held job on this node, collect its outputs and release it.

    1. Claim the run (rent → run); a second delivery or a cancelled job stops here.
    2. Stage the data into a private scratch folder and start the container on the held cores.
    3. Watch it: time limit, cancel, output size; pump its log to the database.
    4. Decide the outcome (run → output), collect outputs and the log into the store.
    5. Release (the record is written), then remove the container and the scratch folder.
    """
    job = Job.objects.select_related("image", "team").filter(pk=job_id).first()
    if job is None:
        return
    hold = job.active_hold
    if hold is None or hold.node.name != node_name:
        log.warning("job %s is not held on node %s; ignoring", job_id, node_name)
        return
    if not actions.start_run(job, now=timezone.now()):
        return
    sandbox = get_sandbox()
    scratch = Scratch(job.pk, uid=job_uid())
    handle = None
    outcome: str  # an Outcome's value, as _watch and _collect return it
    outcome, exit_code, reason, usage = Outcome.FAILED, None, "", Usage()
    try:
        scratch.prepare(job.data_files.all())
        handle = sandbox.run(_spec(job, hold, scratch))
        pump = LogPump(sandbox.logs(handle), scratch.log, job.pk)
        outcome, exit_code, reason = _watch(job, sandbox, handle, scratch, pump)
        pump.finish()
        metered = sandbox.usage(handle)
        usage = Usage(cpu_seconds=metered.cpu_seconds, memory_peak_mb=metered.memory_peak_mb)
    except Exception as exc:
        log.exception("run of job %s failed", job_id)
        outcome, reason = Outcome.FAILED, f"the node could not run the job: {exc}"
    finally:
        if handle is not None:
            sandbox.stop(handle)
    try:
        actions.finish_run(job, outcome=outcome, exit_code=exit_code, reason=reason, now=timezone.now())
        try:
            outcome, reason = _collect(job, scratch, outcome, reason)
        except Exception as exc:
            # Whatever the job left behind, the hold must still be released and its record written.
            log.exception("collecting the outputs of job %s failed", job_id)
            outcome = Outcome.FAILED
            reason = "; ".join(part for part in [reason, f"its outputs could not be collected: {exc}"] if part)
        actions.release(
            job,
            outcome=outcome,
            reason=escape_undecodable(reason),
            exit_code=exit_code,
            now=timezone.now(),
            usage=usage,
            attempt=job.attempt,
        )
    except InvalidTransition:
        log.info("job %s was released by someone else (node lost?)", job_id)
    finally:
        if handle is not None:
            sandbox.remove(handle)
        scratch.remove()


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
    )


def _watch(job: Job, sandbox: Sandbox, handle: str, scratch: Scratch, pump: LogPump) -> tuple[str, int | None, str]:
    deadline = time.monotonic() + job.time_limit_s
    stopped_for: tuple[str, str] | None = None
    stopped_at = 0.0
    while True:
        exited = sandbox.wait(handle, timeout=POLL_S)
        pump.flush()
        if exited is not None:
            return _outcome(job, exited, stopped_for)
        if stopped_for is not None:
            if time.monotonic() - stopped_at > KILL_GRACE_S:
                raise RuntimeError(f"the container did not stop within {KILL_GRACE_S}s of being killed")
            continue
        # One query a poll: is the run still this worker's (not released by the reaper, not a new
        # attempt elsewhere), and was it cancelled?
        state = Job.objects.filter(pk=job.pk, stage=Stage.RUN, attempt=job.attempt).values_list(
            "cancel_requested", flat=True
        )
        cancel_requested = state.first()
        if cancel_requested is None:
            stopped_for = (Outcome.NODE_LOST, "the run was taken away from this node")
        elif time.monotonic() >= deadline:
            stopped_for = (Outcome.TIMED_OUT, f"ran past its time limit of {job.time_limit_s}s and was killed")
        elif cancel_requested:
            stopped_for = (Outcome.CANCELLED, "cancelled while running")
        elif scratch.output_bytes() > settings.E31_OUTPUT_TOTAL_MAX_BYTES:
            cap = settings.E31_OUTPUT_TOTAL_MAX_BYTES
            stopped_for = (Outcome.FAILED, f"wrote more than the output cap of {cap} bytes and was killed")
        if stopped_for is not None:
            stopped_at = time.monotonic()
            sandbox.stop(handle)


def _outcome(job: Job, exited: Exit, stopped_for: tuple[str, str] | None) -> tuple[str, int | None, str]:
    if stopped_for is not None:
        return stopped_for[0], exited.exit_code, stopped_for[1]
    if exited.oom_killed:
        return Outcome.OUT_OF_MEMORY, exited.exit_code, f"killed by the memory limit of {job.memory_mb} MB"
    if exited.exit_code == 0:
        return Outcome.SUCCEEDED, 0, ""
    return Outcome.FAILED, exited.exit_code, f"exited with code {exited.exit_code}"


def _collect(job: Job, scratch: Scratch, outcome: str, reason: str) -> tuple[str, str]:
    """Collect outputs and the log into the store; a run over the output caps fails."""
    limits = outputs.Limits(
        file_bytes=settings.E31_OUTPUT_FILE_MAX_BYTES,
        total_bytes=settings.E31_OUTPUT_TOTAL_MAX_BYTES,
        files=settings.E31_OUTPUT_MAX_FILES,
    )
    notes: list[str] = []
    rows: list[OutputFile] = []
    if scratch.output.is_dir():
        collection = outputs.collect(scratch.output, job.output_patterns, limits)
        for collected in collection.files:
            if escape_undecodable(collected.path) != collected.path:  # the store and the database need a text name
                collection.refused.append(f"{escape_undecodable(collected.path)} (name is not UTF-8)")
                continue
            outputs.store(job.pk, collected)
            rows.append(OutputFile(job=job, path=collected.path, size=collected.size, sha256=collected.sha256))
        if collection.refused:
            notes.append("refused outputs: " + ", ".join(collection.refused))
        if collection.over_cap:
            notes.append(collection.over_cap)
            if outcome == Outcome.SUCCEEDED:
                outcome = Outcome.FAILED
    notes = [escape_undecodable(note) for note in notes]
    # One savepoint: a row the database refuses leaves the connection usable for the release.
    with transaction.atomic():
        OutputFile.objects.bulk_create(rows)
    for note in notes:  # the stored log has the system's notes too
        logs.append_line(job.pk, note)
    logs.seal(job.pk)
    return outcome, "; ".join(part for part in [reason, *notes] if part)


def escape_undecodable(text: str) -> str:
    """`text` with the bytes of non-UTF-8 file names (read as surrogates) escaped, as the database needs."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
