"""Data kept once and named by many: stored blobs (content-addressed per team) that runs name by DataFile rows,
not copies; keeping and freeing a blob both take its row lock (docs/reference/storage.md)."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.core.files import File
from django.db import transaction

from accounting import budgets, store_quotas
from core.refusals import Refused
from jobs.models import StoredBlob
from jobs.storage.quotas import store_standing
from jobs.storage.store import blob_key, blob_written, delete, file_digest, save_blob
from teams.models import Team


class BlobGone(Refused):
    """A blob a submission names was freed meanwhile (its template's file was removed)."""

    status = 409

    def __init__(self, names: list[str]) -> None:
        super().__init__(f"{', '.join(names)}: removed from the template meanwhile; submit again")
        self.names = names

    def explanation(self) -> str:
        return f"{self}."


@dataclass(frozen=True)
class Written:
    """A file whose bytes are at its blob's key (`write`), to be kept under the locks (`keep`)."""

    name: str
    upload: File
    size: int
    sha256: str


def write(team: Team | None, files: Sequence[tuple[str, File]]) -> list[Written]:
    """Write each file's bytes at its blob's key unless they are there; call it before the caller's transaction,
    so a slow upload holds up none of the team's other submissions."""
    written = [Written(name, upload, *file_digest(upload)) for name, upload in files]
    for sha256, file in {w.sha256: w for w in written}.items():
        key = blob_key(team.pk if team is not None else None, sha256)
        if not blob_written(key, file.size):
            save_blob(key, file.upload)
    return written


def keep(
    team: Team | None, written: Sequence[Written], *, now: datetime, kind: str = "template files"
) -> list[tuple[str, StoredBlob]]:
    """Keep each written file as a blob of `team` (None: the operators'), once per sha256: (name, blob) in order.
    Over the team's store quota, OverQuota and none kept. Call inside a transaction: the rows stay locked."""
    if not written:
        return []
    if team is not None:
        budgets.lock_team(team)
    blobs: dict[str, StoredBlob] = {}
    for file in written:
        if file.sha256 not in blobs:
            blobs[file.sha256], _ = StoredBlob.objects.select_for_update().get_or_create(
                team=team, sha256=file.sha256, defaults={"size": file.size}
            )
    new = {w.sha256: w for w in written if not blobs[w.sha256].present}
    if team is not None and new:
        adding = sum(store_quotas.stored_bytes(w.size) for w in new.values())
        try:
            store_quotas.check(store_standing(team, now=now), adding=adding, files=len(new), kind=kind)
        except store_quotas.OverQuota:
            for sha256 in new:  # no row keeps them, and none can meanwhile: each is locked
                delete(blobs[sha256].key)
            raise
    for sha256, file in new.items():
        blob = blobs[sha256]
        if not blob_written(blob.key, file.size):  # freed (or refused) between `write` and the lock: seldom
            save_blob(blob.key, file.upload)
        blob.size, blob.present = file.size, True
        blob.save(update_fields=["size", "present"])
    return [(w.name, blobs[w.sha256]) for w in written]


def lock_present(blobs: Iterable[tuple[str, StoredBlob]]) -> None:
    """Lock the named blobs until the caller's transaction ends; BlobGone when one was freed meanwhile."""
    named = list(blobs)
    if not named:
        return
    present = set(
        StoredBlob.objects.select_for_update()
        .filter(pk__in=[b.pk for _n, b in named], present=True)
        .values_list("pk", flat=True)
    )
    if gone := [name for name, blob in named if blob.pk not in present]:
        raise BlobGone(gone)


def release(blob_ids: Iterable[int]) -> list[StoredBlob]:
    """Free each blob no template file and no job with files left names any more: its bytes leave the store
    and its team's quota. Call after the reference is gone (committed or in the caller's transaction)."""
    freed = []
    for blob_id in sorted(set(blob_ids)):
        with transaction.atomic():
            blob = StoredBlob.objects.select_for_update().filter(pk=blob_id, present=True).first()
            if blob is None or _named(blob):
                continue
            blob.present = False
            blob.save(update_fields=["present"])
            delete(blob.key)  # under the lock: a keep of the same bytes waits, then writes them again
        freed.append(blob)
    return freed


def _named(blob: StoredBlob) -> bool:
    return blob.template_files.exists() or blob.data_files.filter(job__files_deleted_at__isnull=True).exists()
