"""What keeps the ledger honest from outside the database: the chain's key and this machine's heads file.

Someone who can write to the database alone can change, add or remove rows, triggers or not. Two
things they cannot reach keep that from going unnoticed:

- The key of the chain's HMAC (`E31_LEDGER_KEY`, or a random key made on first use in
  `$E31_VAR_DIR/ledger_key`, mode 0600): without it a changed record's hash cannot be recomputed.
- The heads file (`E31_LEDGER_HEADS_FILE`, default `$E31_VAR_DIR/ledger-heads.log`): after each
  record's transaction commits, its sequence and hash are appended and fsync'd, one line
  `sequence hash timestamp`. Records cut off the end with the ledger row rewound to match leave a
  chain that verifies, but the file still names the later head.

The file is this machine's: it holds the heads this machine's processes wrote, so on a pool of
several machines each one witnesses only its own writes (docs/architecture.md, "Accounting").
"""

import logging
import os
import secrets
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

log = logging.getLogger(__name__)

GENESIS = "0" * 64  # the prev_hash of the first record
TAIL_BYTES = 64 * 1024  # how much of the heads file's end is read for its head

_appending = threading.Lock()  # one line at a time from this process's threads


@dataclass(frozen=True)
class Head:
    """The last record of a chain: its sequence and hash (and, from a heads file, when it was written)."""

    sequence: int
    hash: str
    at: str = ""

    def __str__(self) -> str:
        return f"sequence {self.sequence}, hash {self.hash[:12]}…" + (f" at {self.at}" if self.at else "")


# --- the key ------------------------------------------------------------------------------------


def key_path() -> Path:
    return Path(settings.VAR_DIR) / "ledger_key"


def ledger_key() -> bytes:
    """The chain's HMAC key: `E31_LEDGER_KEY`, else the key file, made (0600, random) on first use."""
    configured: str | None = settings.E31_LEDGER_KEY
    if configured:
        return configured.encode()
    path = key_path()
    try:
        key = path.read_bytes().strip()
    except FileNotFoundError:
        return _make_key(path)
    if not key:
        raise ImproperlyConfigured(f"the ledger key file {path} is empty: restore it from a backup")
    return key


def _make_key(path: Path) -> bytes:
    # Written whole to a private temporary file, then linked into place: two processes starting at
    # once (the web server and a worker) never read a half-written key, and the second one to link
    # takes the first one's key instead of its own.
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(64).encode()
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temporary, path)
    except FileExistsError:
        key = path.read_bytes().strip()
    finally:
        temporary.unlink()
    return key


# --- the heads file -----------------------------------------------------------------------------


def heads_path() -> Path:
    configured: Path | None = settings.E31_LEDGER_HEADS_FILE
    return Path(configured) if configured else Path(settings.VAR_DIR) / "ledger-heads.log"


def append_head(head: Head, *, at: datetime, path: Path | None = None) -> None:
    """Append `head` to the heads file as one line and fsync it (called once its record committed).

    A head that cannot be written is logged, not raised: the record is committed already, and
    verify_ledger reports the database ahead of the file."""
    path = path or heads_path()
    line = f"{head.sequence} {head.hash} {at.isoformat()}\n".encode()
    try:
        with _appending:
            path.parent.mkdir(parents=True, exist_ok=True)
            # O_APPEND: each line lands whole at the end, whichever process of this machine writes it.
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
    except OSError:
        log.exception("ledger head %s was not written to %s", head, path)


@dataclass(frozen=True)
class Witnessed:
    """What a heads file says: its highest head (None when it has none) and lines it could not read."""

    path: Path
    head: Head | None
    unreadable: int = 0


def last_head(path: Path | None = None) -> Witnessed:
    """The highest head among the last lines of the heads file.

    The highest, not the last line: two releases committing at once append their heads in either
    order, so the last line may be one behind. Only the file's end is read (TAIL_BYTES), so this
    stays quick however long the file grows.
    """
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
        elif (
            best is None or head.sequence >= best.sequence
        ):  # of equal ones the later: a chain made again (a migration)
            best = head
    return Witnessed(path, best, unreadable)


def _parse(line: bytes) -> Head | None:
    parts = line.decode(errors="replace").split()
    if len(parts) != 3 or not parts[0].isdigit() or len(parts[1]) != 64:
        return None
    return Head(int(parts[0]), parts[1], parts[2])
