"""A template's data files: attached, replaced and removed on its page, kept from a job saved as a template,
and freed from the store once nothing names them (jobs.storage.blobs; docs/reference/templates.md, "Template data")."""

from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import User
from django.core.files import File
from django.db import transaction

from jobs.models import StoredBlob
from jobs.storage import blobs
from jobs.storage.store import BadFileName, sanitize_name
from jobtemplates.models import JobTemplate, TemplateFile
from jobtemplates.signals import template_changed
from teams.access import AnyUser, teams_of


class FilesRefused(ValueError):
    def __init__(self, messages: list[str]) -> None:
        super().__init__(" ".join(messages))
        self.messages = messages


def may_change(user: AnyUser, template: JobTemplate) -> bool:
    """A team's template is its members' to change; the operators' are the operators'."""
    if template.team_id is None:
        return bool(getattr(user, "is_staff", False))
    return teams_of(user).filter(pk=template.team_id).exists()


def named(uploads: Sequence[File], *, unnamed: Sequence[str] = ()) -> list[tuple[str, File]]:
    """The uploads under the names jobs stage them at; FilesRefused as a job's form refuses them."""
    problems = [f"{raw!r} is not a usable file name" for raw in unnamed]
    found: list[tuple[str, File]] = []
    for upload in uploads:
        try:
            name = sanitize_name(upload.name or "")
        except BadFileName as exc:
            problems.append(str(exc))
            continue
        if any(name == taken for taken, _upload in found):
            problems.append(f"Two files are named {name}.")
            continue
        found.append((name, upload))
    if problems:
        raise FilesRefused(problems)
    return found


def _sha(blob: StoredBlob | None) -> str | None:
    return None if blob is None else f"sha256 {blob.sha256[:12]}"


def attach(
    template: JobTemplate, files: Sequence[tuple[str, File]], *, by: User | None, now: datetime
) -> list[TemplateFile]:
    """Keep the files as the template's, one of a name it has replacing it; OverQuota past the team's quota."""
    names = {name for name, _upload in files}
    if len(names) + template.files.exclude(name__in=names).count() > (most := settings.E31_UPLOAD_MAX_FILES):
        raise FilesRefused([f"A template has at most {most} data files, as a job does: remove some first."])
    written = blobs.write(template.team, files)  # before the transaction: no lock is held while it writes
    with transaction.atomic():
        before = {row.name: row.blob for row in template.files.filter(name__in=names).select_related("blob")}
        changes = {f"file {w.name}": [_sha(before.get(w.name)), f"sha256 {w.sha256[:12]}"] for w in written}
        template_changed.send(sender=JobTemplate, template=template, by=by, at=now, changes=changes)
        replaced = template.files.filter(name__in=names)
        kept = blobs.keep(template.team, written, now=now)
        freed = list(replaced.values_list("blob_id", flat=True))
        replaced.delete()
        rows = TemplateFile.objects.bulk_create(TemplateFile(template=template, name=n, blob=b) for n, b in kept)
    blobs.release(freed)
    return rows


class _Gone(Exception):
    """Removed or replaced by another request meanwhile: this one's change is undone."""


def remove(template: JobTemplate, name: str, *, by: User | None, now: datetime) -> bool:
    """Remove the template's file of that name (False: it has none, or it went meanwhile). As attach does:
    template_changed first, which locks the template's schedules, then the file's row, the due pass's order."""
    try:
        with transaction.atomic():
            row = template.files.filter(name=name).select_related("blob").first()
            if row is None:
                return False
            changes = {f"file {name}": [_sha(row.blob), None]}
            template_changed.send(sender=JobTemplate, template=template, by=by, at=now, changes=changes)
            deleted, _ = TemplateFile.objects.filter(pk=row.pk, blob_id=row.blob_id).delete()
            if not deleted:
                raise _Gone
    except _Gone:
        return False
    blobs.release([row.blob_id])
    return True


def delete_template(template: JobTemplate, *, by: User | None, now: datetime) -> None:
    """Delete the template; its files' bytes go once nothing else names them."""
    with transaction.atomic():
        template_changed.send(
            sender=JobTemplate, template=template, by=by, at=now, changes={"deleted": [template.name, None]}
        )
        freed = list(template.files.values_list("blob_id", flat=True))
        template.delete()
    blobs.release(freed)
