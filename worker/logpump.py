"""The log pump: a container's log stream to the run's scratch file, then to the jobs' log store."""

import threading
import uuid
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings

from jobs import logs


class LogPump:
    """Copy a container's log stream to a file in a thread; `flush` moves new bytes to the log store.

    Only the calling thread touches the database: the pump thread does file I/O alone.

    `resume` continues the log of a run whose watcher died (worker.runner takes the run over): the
    engine's stream starts again from the container's first byte, so the bytes already in the file
    are skipped, and the log store is continued from where it ends. (The engine keeps the last 20 MB
    of a container's log, LOG_CONFIG of worker.sandbox.docker: a log over the default E31_LOG_MAX_KB
    is cut before that matters.)
    """

    def __init__(self, stream: Iterable[bytes], path: Path, job_id: uuid.UUID, *, resume: bool = False):
        self.path, self.job_id = path, job_id
        # Where this attempt's bytes start in the job's log: after an earlier attempt's, if any. Kept
        # beside the scratch log so a pump that takes the run over continues at the same place.
        base_file = path.with_name(path.name + ".base")
        if resume:  # no file: the first watcher died before writing it, so before any earlier log
            self.base = int(base_file.read_text()) if base_file.exists() else 0
        else:
            self.base = logs.end(job_id)
            base_file.write_text(str(self.base))
        self.sent = logs.end(job_id) - self.base if resume else 0  # bytes of the file in the store
        self.skip = path.stat().st_size if resume and path.exists() else 0
        self.cap = settings.E31_LOG_MAX_BYTES
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream: Iterable[bytes]) -> None:
        written, skip = self.skip, self.skip
        with open(self.path, "ab") as out:
            try:
                for chunk in stream:
                    if skip:
                        chunk, skip = chunk[skip:], max(0, skip - len(chunk))
                    if written >= self.cap or not chunk:
                        continue  # keep draining so the engine is not blocked
                    chunk = chunk[: self.cap - written]
                    out.write(chunk)
                    written += len(chunk)
                    if written >= self.cap:
                        out.write(logs.TRUNCATED)
                    out.flush()
            except Exception as exc:  # the engine closed the stream under us
                out.write(f"\n[e31: log stream ended: {exc}]\n".encode())

    def flush(self) -> None:
        with open(self.path, "rb") as src:
            src.seek(self.sent)
            data = src.read()
        if data:
            logs.append(self.job_id, self.base + self.sent, data)
            self.sent += len(data)

    def finish(self, timeout: float = 10) -> None:
        self.thread.join(timeout)
        self.flush()
