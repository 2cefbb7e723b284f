"""Job logs: bytes pumped from the container to the node's scratch file, then to the database."""

import threading
from pathlib import Path

from django.conf import settings

from jobs.models import LogChunk

TRUNCATED = b"\n[e31: log truncated: over the log cap]\n"


class LogPump:
    """Copy a container's log stream to a file in a thread; `flush` moves new bytes to the database.

    Only the calling thread touches the database: the pump thread does file I/O alone.
    """

    def __init__(self, stream, path: Path, job_id):
        self.path, self.job_id = path, job_id
        self.sent = 0
        self.cap = settings.E31_LOG_MAX_BYTES
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream) -> None:
        written = 0
        with open(self.path, "ab") as out:
            try:
                for chunk in stream:
                    if written >= self.cap:
                        continue  # keep draining so the engine is not blocked
                    chunk = chunk[: self.cap - written]
                    out.write(chunk)
                    written += len(chunk)
                    if written >= self.cap:
                        out.write(TRUNCATED)
                    out.flush()
            except Exception as exc:  # the engine closed the stream under us
                out.write(f"\n[e31: log stream ended: {exc}]\n".encode())

    def flush(self) -> None:
        with open(self.path, "rb") as src:
            src.seek(self.sent)
            data = src.read()
        if data:
            LogChunk.objects.create(job_id=self.job_id, offset=self.sent, data=data)
            self.sent += len(data)

    def finish(self, timeout: float = 10) -> None:
        self.thread.join(timeout)
        self.flush()


def append_line(job_id, text: str) -> None:
    """Add a line of the system's own (e.g. why a run was stopped) to the job's log."""
    last = LogChunk.objects.filter(job_id=job_id).order_by("-offset").values_list("offset", "data").first()
    end = last[0] + len(last[1]) if last else 0
    LogChunk.objects.create(job_id=job_id, offset=end, data=system_line(text))


def system_line(text: str) -> bytes:
    return f"[e31] {text}\n".encode()


def read_log(job_id, offset: int = 0, limit: int = 1024 * 1024) -> tuple[bytes, int]:
    """Log bytes from `offset` (at most `limit`), and the offset to ask for next."""
    chunks = LogChunk.objects.filter(job_id=job_id)
    first = chunks.filter(offset__lte=offset).order_by("-offset").values_list("offset", flat=True).first() or 0
    out = bytearray()
    for chunk_offset, data in chunks.filter(offset__gte=first).order_by("offset").values_list("offset", "data"):
        out += bytes(data)[max(0, offset - chunk_offset) :]
        if len(out) >= limit:
            break
    out = out[:limit]
    return bytes(out), offset + len(out)


def tail(job_id, size: int = 64 * 1024) -> str:
    """The last `size` bytes of the log as text, for the job page."""
    parts: list[bytes] = []
    total = 0
    for data in LogChunk.objects.filter(job_id=job_id).order_by("-offset").values_list("data", flat=True):
        parts.append(bytes(data))
        total += len(data)
        if total >= size:
            break
    return b"".join(reversed(parts))[-size:].decode("utf-8", errors="replace")
