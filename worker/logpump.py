"""The log pump: a container's log stream to the run's scratch file, then to the jobs' log store."""

import threading
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from django.conf import settings

from jobs.models import LogSpan
from jobs.storage import logs
from worker.sandbox.base import STDERR, STDOUT, LogFrame


class LogPump:
    """A thread copies the log stream to a file (stderr ranges to `<log>.err` first); `flush` sends new bytes on.
    `resume` skips what the file holds: after a takeover the engine's stream starts again from the first byte."""

    def __init__(self, stream: Iterable[bytes | LogFrame], path: Path, job_id: uuid.UUID, *, resume: bool = False):
        self.path, self.job_id = path, job_id
        self.err_path = path.with_name(path.name + ".err")
        self.err_read = 0  # how far `flush` has read the stderr ranges' file
        self.err_pending: list[logs.Marked] = []  # ranges of the file read there, not all sent yet
        # Where this attempt's bytes start in the job's log, kept for a pump that takes the run over.
        base_file = path.with_name(path.name + ".base")
        if resume:  # no file: the first watcher died before writing it, so before any earlier log
            self.base = int(base_file.read_text()) if base_file.exists() else 0
        else:
            self.base = logs.end(job_id)
            base_file.write_text(str(self.base))
            self.err_path.write_text("")  # a new run's file: no ranges yet
        self.sent = logs.end(job_id) - self.base if resume else 0  # bytes of the file in the store
        self.skip = path.stat().st_size if resume and path.exists() else 0
        self.cap = settings.E31_LOG_MAX_BYTES
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream: Iterable[bytes | LogFrame]) -> None:
        written, skip = self.skip, self.skip
        with open(self.path, "ab") as out, open(self.err_path, "a") as err:
            try:
                for piece in stream:
                    source, chunk = piece if isinstance(piece, tuple) else (STDOUT, piece)
                    if skip:  # only the data bytes count: the file holds nothing else before the cap
                        chunk, skip = chunk[skip:], max(0, skip - len(chunk))
                    if written >= self.cap or not chunk:
                        continue  # keep draining so the engine is not blocked
                    chunk = chunk[: self.cap - written]
                    if source == STDERR:
                        self._mark(err, out.tell(), len(chunk), LogSpan.Stream.STDERR)
                    out.write(chunk)
                    written += len(chunk)
                    if written >= self.cap:
                        self._mark(err, out.tell(), len(logs.TRUNCATED), LogSpan.Stream.SYSTEM)
                        out.write(logs.TRUNCATED)
                    out.flush()
            except Exception as exc:  # the engine closed the stream under us
                note = f"\n[e31: log stream ended: {exc}]\n".encode()
                self._mark(err, out.tell(), len(note), LogSpan.Stream.SYSTEM)
                out.write(note)

    @staticmethod
    def _mark(err: TextIO, at: int, size: int, stream: str) -> None:
        """Note a range of the file before its bytes are written, so a flush never sees them without it."""
        err.write(f"{at} {at + size}\n" if stream == LogSpan.Stream.STDERR else f"{at} {at + size} {stream}\n")
        err.flush()

    def flush(self) -> None:
        with open(self.path, "rb") as src:
            src.seek(self.sent)
            data = src.read()
        if data:
            ranges = self._ranges(self.sent, self.sent + len(data))
            stderr = [(self.base + s, self.base + e) for s, e, stream in ranges if stream == LogSpan.Stream.STDERR]
            system = [(self.base + s, self.base + e) for s, e, stream in ranges if stream == LogSpan.Stream.SYSTEM]
            logs.append(self.job_id, self.base + self.sent, data, stderr, system)
            self.sent += len(data)

    def _ranges(self, start: int, end: int) -> list[logs.Marked]:
        if self.err_path.exists():
            with open(self.err_path, "rb") as src:
                src.seek(self.err_read)
                new = src.read()
            new = new[: new.rfind(b"\n") + 1]  # whole lines only
            self.err_read += len(new)
            for fields in (line.split() for line in new.splitlines()):
                stream = fields[2].decode() if len(fields) > 2 else LogSpan.Stream.STDERR
                self.err_pending.append((int(fields[0]), int(fields[1]), stream))
        inside = [(max(s, start), min(e, end), m) for s, e, m in self.err_pending if s < end and e > start]
        self.err_pending = [(max(s, end), e, m) for s, e, m in self.err_pending if e > end]
        return inside

    def finish(self, timeout: float = 10) -> None:
        self.thread.join(timeout)
        self.flush()
