"""Which process of this node watches a run: an exclusive lock on a file, which the kernel drops when that
process dies, so a second delivery finds it taken and a takeover finds it free."""

import fcntl
import os
import time
from pathlib import Path

from django.conf import settings

LOCKS = ".runs"  # in E31_SCRATCH_DIR: node-local, like the runs' scratch folders


def lock_dir() -> Path:
    return Path(settings.E31_SCRATCH_DIR) / LOCKS


class RunLock:
    def __init__(self, run_key: str):
        self.path = lock_dir() / f"{run_key}.lock"
        self._fd: int | None = None

    def acquire(self, *, timeout: float = 0.0) -> bool:
        # The scratch folder is private (staged data), as Scratch.prepare makes it.
        Path(settings.E31_SCRATCH_DIR).mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path.parent.mkdir(exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(0.05)
                continue
            self._fd = fd
            return True

    def release(self, *, remove: bool = False) -> None:
        if self._fd is None:
            return
        if remove:
            self.path.unlink(missing_ok=True)
        os.close(self._fd)  # closing the last descriptor drops the lock
        self._fd = None


def is_watched(run_key: str) -> bool:
    path = lock_dir() / f"{run_key}.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def stale(*, older_than_s: float, now: float) -> list[str]:
    try:
        entries = list(os.scandir(lock_dir()))
    except FileNotFoundError:
        return []
    return [
        entry.name.removesuffix(".lock")
        for entry in entries
        if entry.name.endswith(".lock") and now - entry.stat().st_mtime > older_than_s
    ]


def unlink_if_unwatched(run_key: str) -> bool:
    """Remove an old run's lock file unless held (a new one may be a run's not locked yet); True when removed."""
    lock = RunLock(run_key)
    if not lock.path.exists() or not lock.acquire():
        return False
    lock.release(remove=True)
    return True
