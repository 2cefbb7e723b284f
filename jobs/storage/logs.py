"""Job logs: chunks in the database while a job runs, one sealed file in the store after (docs/architecture.md)."""

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.db import transaction

from jobs.models import LogChunk, LogSpan
from jobs.storage import store
from jobs.storage.store import log_key

TRUNCATED = b"\n[e31: log truncated: over the log cap]\n"


def system_line(text: str) -> bytes:
    return f"[e31] {text}\n".encode()


LINE_PIECES = re.compile(r"[^\n]*\n|[^\n]+")  # each line with its newline, and the last one without
Span = tuple[int, int]  # bytes [start, end) of a log
Marked = tuple[int, int, str]  # bytes [start, end) of a log and who wrote them: a LogSpan.Stream


def append(
    job_id: uuid.UUID, offset: int, data: bytes, stderr: Iterable[Span] = (), system: Iterable[Span] = ()
) -> None:
    """Add bytes at `offset` with their stderr and `system` ranges; a node's retry of the same append adds nothing."""
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


def pieces(data: bytes, offset: int, spans: Sequence[Marked]) -> list[tuple[str, str]]:
    """Log bytes from `offset` as (text, class) pieces: "err", "sys" or "" (stdout), runs of one class joined."""
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
    return pieces(data, offset, marked_spans(job_id, offset, offset + len(data)) if data else [])


def end(job_id: uuid.UUID) -> int:
    """The offset just past the last chunk of a log that is not sealed yet (0 when it has none)."""
    last = LogChunk.objects.filter(job_id=job_id).order_by("-offset").values_list("offset", "data").first()
    return last[0] + len(last[1]) if last else 0


def append_line(job_id: uuid.UUID, text: str) -> None:
    """Add a platform line (e.g. why a run was stopped) to a log that is not sealed yet."""
    at, line = end(job_id), system_line(text)
    with transaction.atomic():
        LogChunk.objects.create(job_id=job_id, offset=at, data=line)
        _add_spans(job_id, [(at, at + len(line), LogSpan.Stream.SYSTEM)])


def seal(job_id: uuid.UUID, *, notes: Sequence[str] = ()) -> None:
    """Store the live log and `notes` as `[e31]` lines, then drop the chunks; the notes never go to the chunks,
    so a seal repeated after a crash writes them once."""
    chunks = LogChunk.objects.filter(job_id=job_id).order_by("offset").values_list("data", flat=True)
    content = b"".join(bytes(data) for data in chunks.iterator())
    key = log_key(job_id)
    if not content and store.exists(key):
        return  # sealed before (its notes with it): nothing new
    written = b"".join(system_line(note) for note in notes)
    _add_spans(job_id, [(len(content), len(content) + len(written), LogSpan.Stream.SYSTEM)])
    content += written
    store.replace(key, content)
    LogChunk.objects.filter(job_id=job_id).delete()


def unseal(job_id: uuid.UUID) -> None:
    """Put a sealed log back into the live log, so the job's next attempt writes after it."""
    key = log_key(job_id)
    if not store.exists(key) or LogChunk.objects.filter(job_id=job_id).exists():
        return
    LogChunk.objects.create(job_id=job_id, offset=0, data=store.read_range(key, 0, store.size(key)))
    transaction.on_commit(lambda: store.delete(key))


def is_sealed(job_id: uuid.UUID) -> bool:
    return store.exists(log_key(job_id))


def read_log(job_id: uuid.UUID, offset: int = 0, limit: int = 1024 * 1024) -> tuple[bytes, int]:
    """Log bytes from `offset` (at most `limit`), and the offset to ask for next; none past the end."""
    try:  # sealed: those bytes of the stored log (from S3, a ranged read)
        data = store.read_range(log_key(job_id), offset, limit)
    except FileNotFoundError:  # not sealed: live in the database
        return _read_live(job_id, offset, limit)
    return data, offset + len(data)


def _read_live(job_id: uuid.UUID, offset: int, limit: int) -> tuple[bytes, int]:
    chunks = LogChunk.objects.filter(job_id=job_id)
    first = chunks.filter(offset__lte=offset).order_by("-offset").values_list("offset", flat=True).first() or 0
    out = bytearray()
    for chunk_offset, chunk in chunks.filter(offset__gte=first).order_by("offset").values_list("offset", "data"):
        out += bytes(chunk)[max(0, offset - chunk_offset) :]
        if len(out) >= limit:
            break
    out = out[:limit]
    return bytes(out), offset + len(out)


def tail_pieces(job_id: uuid.UUID, size: int = 64 * 1024) -> tuple[list[tuple[str, str]], int, bool]:
    """The last whole lines within `size` bytes as `pieces`, the offset past them, and whether bytes were left out."""
    data, start, next_offset = _tail(job_id, size)
    return read_pieces(job_id, data, start), next_offset, start > 0


def last_bytes(job_id: uuid.UUID, size: int) -> tuple[bytes, int, int]:
    """The log's last `size` bytes (fewer when it is shorter), where they start, and the offset past them."""
    try:  # sealed: the stored log's last bytes (from S3, one ranged read)
        data, start = store.read_tail(log_key(job_id), size)
    except FileNotFoundError:  # not sealed: live in the database
        end_at = end(job_id)
        start = max(0, end_at - size)
        data, next_offset = _read_live(job_id, start, end_at - start)
        return data, start, next_offset
    return data, start, start + len(data)


def _tail(job_id: uuid.UUID, size: int, *, whole_lines: bool = False) -> tuple[bytes, int, int]:
    """`last_bytes` from a line's start; with `whole_lines`, without a last line not ended yet (the next poll's)."""
    data, start, next_offset = last_bytes(job_id, size)
    if start > 0:  # begin at a line's start
        cut = data.find(b"\n") + 1 if b"\n" in data else len(data)
        data, start = data[cut:], start + cut
    if whole_lines and (cut := data.rfind(b"\n") + 1) < len(data):
        data, next_offset = data[:cut], start + cut
    return data, start, next_offset


@dataclass
class Line:
    """One line of a log as the page numbers it (`#L120`); None for the rest of a line an earlier answer began."""

    number: int | None
    pieces: list[tuple[str, str]] = field(default_factory=list)


def numbered(pieces: Iterable[tuple[str, str]], first: int, *, continues: bool = False) -> list[Line]:
    """`pieces` cut into lines numbered from `first`; with `continues`, the first bytes end a line begun before."""
    out: list[Line] = [Line(None)] if continues else []
    number, open_line = first, continues
    for text, cls in pieces:
        for piece in LINE_PIECES.findall(text):
            if not open_line:
                out.append(Line(number))
                number, open_line = number + 1, True
            out[-1].pieces.append((piece, cls))
            open_line = not piece.endswith("\n")
    return [line for line in out if line.pieces]


def lines_before(job_id: uuid.UUID, offset: int) -> int:
    """How many lines end before byte `offset` of the log, read in blocks (a log is capped: E31_LOG_MAX_KB)."""
    try:  # sealed: the stored log's bytes before `offset` (from S3, one ranged read)
        return sum(block.count(b"\n") for block in store.read_blocks(log_key(job_id), stop=offset))
    except FileNotFoundError:  # not sealed: live in the database
        pass
    count = 0
    chunks = LogChunk.objects.filter(job_id=job_id, offset__lt=offset).order_by("offset")
    for chunk_offset, data in chunks.values_list("offset", "data").iterator():
        count += bytes(data)[: offset - chunk_offset].count(b"\n")
    return count


def tail_lines(job_id: uuid.UUID, size: int, *, whole_lines: bool = False) -> tuple[list[Line], int, int, bool]:
    """The tail as numbered lines, the offset and line number past them, and whether lines were left out."""
    data, start, next_offset = _tail(job_id, size, whole_lines=whole_lines)
    first = 1 + (lines_before(job_id, start) if start else 0)
    lines = numbered(read_pieces(job_id, data, start), first)
    return lines, next_offset, first + data.count(b"\n"), start > 0
