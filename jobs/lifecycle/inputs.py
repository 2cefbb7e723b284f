"""What a run stages under /data: the job's own data files, and the outputs of earlier jobs it reads
(`inputs_from`) at /data/from/<job id>/<output path>, copied by its node from the store."""

import fnmatch
import uuid
from dataclasses import dataclass

from django.db.models import Q

from jobs.models import Input, Job, OutputFile
from jobs.storage.store import output_key

FROM = "from"  # the folder of /data the inputs are staged under


@dataclass(frozen=True)
class Staged:
    """One file of a run's /data: its path there, where its bytes are in the store, its size and sha256."""

    name: str
    key: str
    size: int
    sha256: str = ""  # as it was uploaded (or collected): staging checks the bytes it copies against it
    gone: str = ""  # why its bytes are no longer in the store ("" while they should be)


def matches(path: str, patterns: list[str]) -> bool:
    """Whether an output path is one the patterns name: all when there are none; `*` crosses folders,
    and a pattern naming a folder takes everything under it."""
    return not patterns or any(
        fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(path, p.rstrip("/") + "/*") for p in patterns
    )


def input_path(from_job_id: uuid.UUID, path: str) -> str:
    return f"{FROM}/{from_job_id}/{path}"


def staged_files(job: Job) -> list[Staged]:
    """The files the job's run stages, its own data files first (three queries, however many)."""
    own = [Staged(f.name, f.stored_key, f.size, f.sha256) for f in job.data_files.select_related("blob")]
    reads = Q(job=job) | Q(array_id=job.array_id) if job.array_id is not None else Q(job=job)
    globs: dict[uuid.UUID, list[str]] = {}
    deleted_at = {}
    for from_job_id, glob, files_deleted_at in Input.objects.filter(reads).values_list(
        "from_job_id", "glob", "from_job__files_deleted_at"
    ):
        globs.setdefault(from_job_id, []).append(glob or "*")  # an empty glob would take all anyway
        deleted_at[from_job_id] = files_deleted_at
    inputs = []
    outputs = OutputFile.objects.filter(job_id__in=globs).order_by("job_id", "path")
    for from_job_id, path, size, sha256 in outputs.values_list("job_id", "path", "size", "sha256"):
        if not matches(path, globs[from_job_id]):
            continue
        when = deleted_at[from_job_id]
        gone = f"the outputs of job {from_job_id} were deleted on {when:%Y-%m-%d} (retention)" if when else ""
        inputs.append(Staged(input_path(from_job_id, path), output_key(from_job_id, path), size, sha256, gone))
    return own + inputs


def kept_outputs(job: Job) -> list[Staged]:
    """The outputs a preempted attempt left, which its next run finds in /output (a checkpoint); [] for a job
    never preempted (a retry after a failure starts afresh)."""
    if not job.preemptions:
        return []
    rows = OutputFile.objects.filter(job=job).order_by("path").values_list("path", "size", "sha256")
    return [Staged(path, output_key(job.pk, path), size, sha256) for path, size, sha256 in rows]
