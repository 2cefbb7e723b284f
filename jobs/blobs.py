"""Data kept once and named by many: a template's files are stored blobs (content-addressed per team), and
each run of the template gets DataFile rows naming them, not copies.

Keeping and freeing a blob both take its row lock (StoredBlob rows are never deleted), so a blob is freed
only when, under that lock, no template file and no job whose files retention has not deleted names it;
a submission locks the blobs it names and refuses one freed meanwhile (BlobGone).
"""

from collections.abc import Iterable, Sequence
from datetime import datetime

from django.core.files import File
from django.db import transaction

from accounting import budgets, store_quotas
from jobs.models import StoredBlob
from jobs.quotas import store_standing
from jobs.store import delete_blob, file_digest, save_blob
from teams.models import Team


class BlobGone(Exception):
    """A blob a submission names was freed meanwhile (its template's file was removed)."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(f"{', '.join(names)}: removed from the template meanwhile; submit again")
        self.names = names


def keep(team: Team | None, files: Sequence[tuple[str, File]], *, now: datetime) -> list[tuple[str, StoredBlob]]:
    """Store each file once as a blob of `team` (or of the operators), unless one of the same sha256 is kept
    already; returns (name, blob) in the given order. Raises OverQuota ("template files") when the bytes new
    to the team's store would pass its quota, and then keeps none. Call inside a transaction: the rows stay
    locked until the caller's template files name them."""
    digests = [(name, upload, *file_digest(upload)) for name, upload in files]  # read before any lock
    if not digests:
        return []
    if team is not None:
        budgets.lock_team(team)
    blobs: dict[str, StoredBlob] = {}
    for _name, _upload, size, sha256 in digests:
        if sha256 not in blobs:
            StoredBlob.objects.get_or_create(team=team, sha256=sha256, defaults={"size": size})
            blobs[sha256] = StoredBlob.objects.select_for_update().get(team=team, sha256=sha256)
    new = {sha256: (upload, size) for _n, upload, size, sha256 in digests if not blobs[sha256].present}
    if team is not None and new:
        adding = sum(store_quotas.stored_bytes(size) for _upload, size in new.values())
        store_quotas.check(store_standing(team, now=now), adding=adding, files=len(new), kind="template files")
    for sha256, (upload, size) in new.items():
        blob = blobs[sha256]
        save_blob(blob.key, upload)
        blob.size, blob.present = size, True
        blob.save(update_fields=["size", "present"])
    return [(name, blobs[sha256]) for name, _upload, _size, sha256 in digests]


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
            delete_blob(blob.key)  # under the lock: a keep of the same bytes waits, then writes them again
        freed.append(blob)
    return freed


def _named(blob: StoredBlob) -> bool:
    return blob.template_files.exists() or blob.data_files.filter(job__files_deleted_at__isnull=True).exists()
