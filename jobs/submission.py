"""SUBMIT: a job declared by a team, with its data staged for it alone."""

from dataclasses import dataclass, field

from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs.dispatch import request_schedule
from jobs.models import DataFile, Job, RuntimeImage
from jobs.store import delete_stored, save_upload
from teams.models import Team


@dataclass
class Declaration:
    """What a team declares: the work, the data, the request and the output."""

    team: Team
    name: str
    image: RuntimeImage
    command: list[str]
    env: dict[str, str]
    cpus: int
    memory_mb: int
    gpus: int
    time_limit_s: int
    output_patterns: list[str]
    max_retries: int = 0
    files: list[tuple[str, UploadedFile]] = field(default_factory=list)  # (sanitized name, upload)


def submit(declaration: Declaration, *, user: User, idempotency_key: str = "") -> tuple[Job, bool]:
    """Create the job and stage its data; returns (job, created).

    A repeated Idempotency-Key returns the job it made first. If storing any file fails, the job
    and every file already stored are removed: nothing partial is left.
    """
    if idempotency_key:
        existing = Job.objects.filter(submitted_by=user, idempotency_key=idempotency_key).first()
        if existing is not None:
            return existing, False
    job = Job(
        team=declaration.team,
        submitted_by=user,
        name=declaration.name,
        image=declaration.image,
        command=declaration.command,
        env=declaration.env,
        cpus=declaration.cpus,
        memory_mb=declaration.memory_mb,
        gpus=declaration.gpus,
        time_limit_s=declaration.time_limit_s,
        output_patterns=declaration.output_patterns,
        max_retries=declaration.max_retries,
        idempotency_key=idempotency_key,
        submitted_at=timezone.now(),
    )
    try:
        with transaction.atomic():
            job.save(force_insert=True)
            for name, upload in declaration.files:
                size, sha256 = save_upload(job.pk, name, upload)
                DataFile.objects.create(job=job, name=name, size=size, sha256=sha256)
            request_schedule()
    except IntegrityError:
        delete_stored(job.pk)
        if idempotency_key:  # a concurrent request with the same key won the race
            return Job.objects.get(submitted_by=user, idempotency_key=idempotency_key), False
        raise
    except BaseException:
        delete_stored(job.pk)
        raise
    return job, True
