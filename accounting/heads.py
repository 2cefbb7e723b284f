"""This machine's heads file: it still names the head after someone who can write the database cut records off."""

import logging
import os
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.conf import settings

log = logging.getLogger(__name__)

TAIL_BYTES = 64 * 1024  # how much of the heads file's end is read for its head

_appending = threading.Lock()  # one line at a time from this process's threads


@dataclass(frozen=True)
class Head:
    sequence: int
    hash: str
    at: str = ""

    def __str__(self) -> str:
        return f"sequence {self.sequence}, hash {self.hash[:12]}…" + (f" at {self.at}" if self.at else "")


def heads_path() -> Path:
    configured: Path | None = settings.E31_LEDGER_HEADS_FILE
    return Path(configured) if configured else Path(settings.VAR_DIR) / "ledger-heads.log"


def append_head(head: Head, *, at: datetime, path: Path | None = None) -> None:
    """A failure is logged: its record is committed already."""
    path = path or heads_path()
    line = f"{head.sequence} {head.hash} {at.isoformat()}\n".encode()
    try:
        with _appending:
            path.parent.mkdir(parents=True, exist_ok=True)
            # O_APPEND: each line lands whole at the end, whichever process of this machine writes it.
            write_synced(path, line, os.O_APPEND)
    except OSError:
        log.exception("ledger head %s was not written to %s", head, path)


def write_synced(path: Path, data: bytes, flag: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flag, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Witnessed:
    path: Path
    head: Head | None
    unreadable: int = 0


def last_head(path: Path | None = None) -> Witnessed:
    """The highest of the last lines: two releases committing at once append in either order."""
    path = path or heads_path()
    try:
        with open(path, "rb") as file:
            size = file.seek(0, os.SEEK_END)
            file.seek(max(0, size - TAIL_BYTES))
            tail = file.read()
    except FileNotFoundError:
        return Witnessed(path, None)
    lines = tail.splitlines()
    if size > TAIL_BYTES and lines:
        lines = lines[1:]  # the first line read may be cut
    best: Head | None = None
    unreadable = 0
    for line in lines:
        head = _parse(line)
        if head is None:
            unreadable += 1
        elif best is None or head.sequence >= best.sequence:  # of equal ones the later: a chain made again
            best = head
    return Witnessed(path, best, unreadable)


def _parse(line: bytes) -> Head | None:
    parts = line.decode(errors="replace").split()
    if len(parts) != 3 or not parts[0].isdigit() or len(parts[1]) != 64:
        return None
    return Head(int(parts[0]), parts[1], parts[2])
