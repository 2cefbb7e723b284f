"""Job logs: one store, read by the job page and the API alike.

While a job runs its node appends the log to the database in chunks, so any web server can tail a
job running on any node. When the run ends (its outputs collected, or its node lost for good) the
chunks are written to the store as one file, the record of the log (`seal`), and dropped. Readers
take the stored file once it exists and the chunks until then. The node's pump stops writing past
E31_LOG_MAX_KB per attempt. A job retried after its node was lost keeps one log: the next attempt
writes after the end of the last (`unseal` puts a sealed log back into chunks first).
"""

import uuid
from collections.abc import Sequence

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction

from jobs.models import LogChunk
from jobs.store import log_key

TRUNCATED = b"\n[e31: log truncated: over the log cap]\n"


def system_line(text: str) -> bytes:
    return f"[e31] {text}\n".encode()


def append(job_id: uuid.UUID, offset: int, data: bytes) -> None:
    """Add bytes the node read from the job's container, at `offset`. A repeat of the same append (a
    node trying again after its database connection dropped as the first one was written) adds nothing."""
    LogChunk.objects.bulk_create([LogChunk(job_id=job_id, offset=offset, data=data)], ignore_conflicts=True)


def end(job_id: uuid.UUID) -> int:
    """The offset just past the last chunk of a log that is not sealed yet (0 when it has none)."""
    last = LogChunk.objects.filter(job_id=job_id).order_by("-offset").values_list("offset", "data").first()
    return last[0] + len(last[1]) if last else 0


def append_line(job_id: uuid.UUID, text: str) -> None:
    """Add a line of the system's own (e.g. why a run was stopped) to a log that is not sealed yet."""
    LogChunk.objects.create(job_id=job_id, offset=end(job_id), data=system_line(text))


def seal(job_id: uuid.UUID, *, notes: Sequence[str] = ()) -> None:
    """Write the live log, then the system's `notes` as `[e31]` lines, to the store as the job's
    record of its log; then drop the chunks.

    Idempotent: the notes are added to the file, never to the chunks, so a seal repeated after a
    crash (the run taken over) writes them once; with no chunks left, the stored file stands.
    """
    chunks = LogChunk.objects.filter(job_id=job_id).order_by("offset").values_list("data", flat=True)
    content = b"".join(bytes(data) for data in chunks.iterator())
    key = log_key(job_id)
    if not content and default_storage.exists(key):
        return  # sealed before (its notes with it): nothing new
    content += b"".join(system_line(note) for note in notes)
    if default_storage.exists(key):
        default_storage.delete(key)
    default_storage.save(key, ContentFile(content))
    LogChunk.objects.filter(job_id=job_id).delete()


def unseal(job_id: uuid.UUID) -> None:
    """Put a sealed log back into the live log, so the job's next attempt writes after it."""
    key = log_key(job_id)
    if not default_storage.exists(key) or LogChunk.objects.filter(job_id=job_id).exists():
        return
    with default_storage.open(key, "rb") as stored:
        LogChunk.objects.create(job_id=job_id, offset=0, data=stored.read())
    transaction.on_commit(lambda: default_storage.delete(key))


def is_sealed(job_id: uuid.UUID) -> bool:
    return default_storage.exists(log_key(job_id))


def read_log(job_id: uuid.UUID, offset: int = 0, limit: int = 1024 * 1024) -> tuple[bytes, int]:
    """Log bytes from `offset` (at most `limit`), and the offset to ask for next."""
    if is_sealed(job_id):
        with default_storage.open(log_key(job_id), "rb") as stored:
            stored.seek(offset)
            data = stored.read(limit)
        return data, offset + len(data)
    chunks = LogChunk.objects.filter(job_id=job_id)
    first = chunks.filter(offset__lte=offset).order_by("-offset").values_list("offset", flat=True).first() or 0
    out = bytearray()
    for chunk_offset, chunk in chunks.filter(offset__gte=first).order_by("offset").values_list("offset", "data"):
        out += bytes(chunk)[max(0, offset - chunk_offset) :]
        if len(out) >= limit:
            break
    out = out[:limit]
    return bytes(out), offset + len(out)


def tail(job_id: uuid.UUID, size: int = 64 * 1024) -> str:
    """The last `size` bytes of the log as text, for the job page."""
    if is_sealed(job_id):
        with default_storage.open(log_key(job_id), "rb") as stored:
            stored.seek(max(0, default_storage.size(log_key(job_id)) - size))
            return stored.read(size).decode("utf-8", errors="replace")
    parts: list[bytes] = []
    total = 0
    for data in LogChunk.objects.filter(job_id=job_id).order_by("-offset").values_list("data", flat=True):
        parts.append(bytes(data))
        total += len(data)
        if total >= size:
            break
    return b"".join(reversed(parts))[-size:].decode("utf-8", errors="replace")


def tail_with_end(job_id: uuid.UUID, size: int = 64 * 1024) -> tuple[str, int, bool]:
    """The last whole lines of the log within `size` bytes, the offset just past them (where the job
    page's live log asks for more from), and whether earlier bytes were left out."""
    end_at = default_storage.size(log_key(job_id)) if is_sealed(job_id) else end(job_id)
    start = max(0, end_at - size)
    data, next_offset = read_log(job_id, start, limit=end_at - start)
    if start > 0:  # begin at a line's start
        data = data[data.find(b"\n") + 1 :] if b"\n" in data else b""
    return data.decode("utf-8", errors="replace"), next_offset, start > 0
