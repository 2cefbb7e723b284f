"""Job logs: one store, read by the job page and the API alike.

While a job runs its node appends the log to the database in chunks, so any web server can tail a
job running on any node. When the run ends (its outputs collected, or its node lost for good) the
chunks are written to the store as one file, the record of the log (`seal`), and dropped. Readers
take the stored file once it exists and the chunks until then. The node's pump stops writing past
E31_LOG_MAX_KB per attempt. A job retried after its node was lost keeps one log: the next attempt
writes after the end of the last (`unseal` puts a sealed log back into chunks first).

The log is one stream, as the job wrote it: the byte ranges that came from its stderr, and the ones
the platform wrote itself (its `[e31]` notes), are kept beside it (LogSpan), so the job page tells
stdout, stderr and the platform apart (`pieces`) and the download is unchanged. Only those ranges say
what the platform wrote: a job that prints `[e31] ...` is shown as its own output.
"""

import uuid
from collections.abc import Iterable, Sequence

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction

from jobs.models import LogChunk, LogSpan
from jobs.store import log_key

TRUNCATED = b"\n[e31: log truncated: over the log cap]\n"


def system_line(text: str) -> bytes:
    return f"[e31] {text}\n".encode()


Span = tuple[int, int]  # bytes [start, end) of a log
Marked = tuple[int, int, str]  # bytes [start, end) of a log and who wrote them: a LogSpan.Stream


def append(
    job_id: uuid.UUID, offset: int, data: bytes, stderr: Iterable[Span] = (), system: Iterable[Span] = ()
) -> None:
    """Add bytes the node read from the job's container, at `offset`, with the ranges of them (offsets
    in the log) that came from its stderr and the ones the node wrote itself (`system`: e.g. that the
    log was cut). A repeat of the same append (a node trying again after its database connection
    dropped as the first one was written) adds nothing."""
    marked = [(s, e, LogSpan.Stream.STDERR) for s, e in stderr] + [(s, e, LogSpan.Stream.SYSTEM) for s, e in system]
    with transaction.atomic():  # a reader never sees the bytes without their spans
        LogChunk.objects.bulk_create([LogChunk(job_id=job_id, offset=offset, data=data)], ignore_conflicts=True)
        _add_spans(job_id, marked)


def _add_spans(job_id: uuid.UUID, marked: Iterable[Marked]) -> None:
    spans = [LogSpan(job_id=job_id, start=s, end=e, stream=stream) for s, e, stream in merged(marked) if s < e]
    LogSpan.objects.bulk_create(spans, ignore_conflicts=True)


def merged(spans: Iterable[Marked]) -> list[Marked]:
    """Spans in order, the ones of the same stream that touch or overlap made one."""
    out: list[Marked] = []
    for start, end, stream in sorted(spans):
        if out and start <= out[-1][1] and stream == out[-1][2]:
            out[-1] = (out[-1][0], max(out[-1][1], end), stream)
        else:
            out.append((start, end, stream))
    return out


def marked_spans(job_id: uuid.UUID, start: int, end: int) -> list[Marked]:
    """The ranges of the log from stderr or the platform that overlap bytes [start, end)."""
    rows = LogSpan.objects.filter(job_id=job_id, start__lt=end, end__gt=start).order_by("start")
    return merged(rows.values_list("start", "end", "stream"))


def stderr_spans(job_id: uuid.UUID, start: int, end: int) -> list[Span]:
    """The stderr ranges of the log that overlap bytes [start, end)."""
    return [(s, e) for s, e, stream in marked_spans(job_id, start, end) if stream == LogSpan.Stream.STDERR]


def pieces(data: bytes, offset: int, spans: Sequence[Marked]) -> list[tuple[str, str]]:
    """Log bytes that start at `offset` as text to show, in pieces with a class: the stream of the span
    they lie in ("err" from stderr, "sys" written by the platform), "" for the rest (stdout). Runs of
    the same class are one piece."""
    out: list[tuple[str, str]] = []

    def add(part: bytes, cls: str) -> None:
        if not part:
            return
        text = part.decode("utf-8", errors="replace")
        if out and out[-1][1] == cls:
            out[-1] = (out[-1][0] + text, cls)
        else:
            out.append((text, cls))

    end_at, cursor = offset + len(data), offset
    for start, end, stream in spans:
        if end <= cursor or start >= end_at:
            continue
        begin = max(start, cursor)
        add(data[cursor - offset : begin - offset], "")
        cursor = min(end, end_at)
        add(data[begin - offset : cursor - offset], stream)
    add(data[cursor - offset :], "")
    return out


def read_pieces(job_id: uuid.UUID, data: bytes, offset: int) -> list[tuple[str, str]]:
    """`pieces` of log bytes read from the job's log at `offset`."""
    return pieces(data, offset, marked_spans(job_id, offset, offset + len(data)) if data else [])


def end(job_id: uuid.UUID) -> int:
    """The offset just past the last chunk of a log that is not sealed yet (0 when it has none)."""
    last = LogChunk.objects.filter(job_id=job_id).order_by("-offset").values_list("offset", "data").first()
    return last[0] + len(last[1]) if last else 0


def append_line(job_id: uuid.UUID, text: str) -> None:
    """Add a line of the system's own (e.g. why a run was stopped) to a log that is not sealed yet,
    marked as the platform's."""
    at, line = end(job_id), system_line(text)
    with transaction.atomic():
        LogChunk.objects.create(job_id=job_id, offset=at, data=line)
        _add_spans(job_id, [(at, at + len(line), LogSpan.Stream.SYSTEM)])


def seal(job_id: uuid.UUID, *, notes: Sequence[str] = ()) -> None:
    """Write the live log, then the system's `notes` as `[e31]` lines (their range marked as the
    platform's), to the store as the job's record of its log; then drop the chunks.

    Idempotent: the notes are added to the file, never to the chunks, so a seal repeated after a
    crash (the run taken over) writes them once; with no chunks left, the stored file stands.
    """
    chunks = LogChunk.objects.filter(job_id=job_id).order_by("offset").values_list("data", flat=True)
    content = b"".join(bytes(data) for data in chunks.iterator())
    key = log_key(job_id)
    if not content and default_storage.exists(key):
        return  # sealed before (its notes with it): nothing new
    written = b"".join(system_line(note) for note in notes)
    _add_spans(job_id, [(len(content), len(content) + len(written), LogSpan.Stream.SYSTEM)])
    content += written
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
    """Log bytes from `offset` (at most `limit`), and the offset to ask for next; none past the end."""
    if is_sealed(job_id):
        if offset >= default_storage.size(log_key(job_id)):  # a seek far past the end is EINVAL on ext4
            return b"", offset
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
    data, _, next_offset, cut = _tail_bytes(job_id, size)
    return data.decode("utf-8", errors="replace"), next_offset, cut


def tail_pieces(job_id: uuid.UUID, size: int = 64 * 1024) -> tuple[list[tuple[str, str]], int, bool]:
    """`tail_with_end`, its text in `pieces`."""
    data, start, next_offset, cut = _tail_bytes(job_id, size)
    return read_pieces(job_id, data, start), next_offset, cut


def _tail_bytes(job_id: uuid.UUID, size: int) -> tuple[bytes, int, int, bool]:
    end_at = default_storage.size(log_key(job_id)) if is_sealed(job_id) else end(job_id)
    start = max(0, end_at - size)
    data, next_offset = read_log(job_id, start, limit=end_at - start)
    left_out = start > 0
    if left_out:  # begin at a line's start
        cut = data.find(b"\n") + 1 if b"\n" in data else len(data)
        data, start = data[cut:], start + cut
    return data, start, next_offset, left_out
