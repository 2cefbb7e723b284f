import shlex
from dataclasses import dataclass, field

from django.contrib.auth.models import User
from django.core.files import File
from django.db import transaction
from django.utils import timezone

from jobs.models import DEFAULT_RETRY_ON, Job, StoredBlob
from jobs.storage import blobs
from jobs.storage.store import open_file
from jobs.submit.declaration import Declaration
from jobtemplates.models import JobTemplate, TemplateFile, literal


class CommandTooLong(ValueError):
    """The job's command, quoted as a template's command line, is longer than a template may hold."""


class DataGone(Exception):
    def __init__(self, names: list[str]) -> None:
        super().__init__(f"{', '.join(names)} left the store meanwhile, as the job's retention ended")
        self.names = names


@dataclass
class Saved:
    template: JobTemplate
    files: list[str] = field(default_factory=list)  # the names of the data files it keeps
    files_deleted: bool = False  # retention had deleted the job's data files: the template has none


def save_as_template(job: Job, *, user: User, name: str = "") -> Saved:
    """A template of the job's team, its declaration as defaults (braces doubled: the same argv) and its data
    files each stored once for the team; OverQuota, DataGone, or OSError when the store fails."""
    declared = Declaration.from_job(job)
    command = shlex.join(literal(argument) for argument in declared.command)
    if len(command) > (most := JobTemplate._meta.get_field("command").max_length or 0):
        raise CommandTooLong(f"its command, written as a template's, is {len(command)} characters; at most {most}.")
    data_files = [] if job.files_deleted_at else list(job.data_files.select_related("blob"))
    opened: list[tuple[str, File]] = []
    try:
        for own in (f for f in data_files if f.blob is None):
            try:
                opened.append((own.name, open_file(own.stored_key, own.name)))
            except FileNotFoundError:
                raise DataGone([own.name]) from None
        written = blobs.write(job.team, opened)  # before the transaction: no lock is held while it writes
        with transaction.atomic():
            template = JobTemplate.objects.create(
                team=job.team,
                name=(name or job.name)[:200],
                description=f"Saved from job {job.name} ({job.pk}) by {user.username}."[:500],
                image=declared.image,
                command=command,
                defaults={},
                env=declared.env,
                output_patterns=declared.output_patterns,
                cpus=declared.cpus,
                memory_mb=declared.memory_mb,
                gpus=declared.gpus,
                time_limit_s=declared.time_limit_s,
                max_retries=declared.max_retries,
                retry_on=[] if declared.retry_on == list(DEFAULT_RETRY_ON) else declared.retry_on,
                retry_memory_factor=declared.retry_memory_factor,
                retry_delay_s=declared.retry_delay_s,
                created_by=user,
            )
            named: list[tuple[str, StoredBlob]] = [(f.name, f.blob) for f in data_files if f.blob is not None]
            try:
                blobs.lock_present(named)
            except blobs.BlobGone as exc:  # freed since the job was read: its retention deleted its files
                raise DataGone(exc.names) from exc
            named += blobs.keep(job.team, written, now=timezone.now())
            TemplateFile.objects.bulk_create(TemplateFile(template=template, name=n, blob=b) for n, b in named)
    finally:
        for _name, stored in opened:
            stored.close()
    return Saved(template, sorted(n for n, _b in named), files_deleted=job.files_deleted_at is not None)
