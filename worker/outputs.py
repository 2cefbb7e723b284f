"""Output collection: what a job left under /output, taken by the host without trusting it.

The container has exited when this runs, but its files are still hostile: symlinks are never
followed, and hardlinks, devices, fifos and sockets are refused, so a job cannot make the host
read (and return) a file outside its own output folder.
"""

import fnmatch
import hashlib
import os
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.core.files.base import File
from django.core.files.storage import default_storage

from jobs.store import output_key

CHUNK = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    file_bytes: int
    total_bytes: int
    files: int


@dataclass
class Collected:
    path: str
    size: int
    sha256: str
    source: Path


@dataclass
class Collection:
    files: list[Collected] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # "path (why)"
    over_cap: str = ""  # why collection stopped, empty when within the caps


def matches(path: str, patterns: list[str]) -> bool:
    if not patterns:
        return True
    return any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(path, p.rstrip("/") + "/*") for p in patterns)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "not a regular file"


def _walk(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Yield (relative path, lstat) for every entry below root, never entering a symlinked folder."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            st = entry.stat(follow_symlinks=False)
            rel = Path(entry.path).relative_to(root).as_posix()
            if stat.S_ISDIR(st.st_mode):
                stack.append(Path(entry.path))
            else:
                yield rel, st


def _hash_file(path: Path, expected: os.stat_result, cap: int) -> tuple[int, str] | str:
    """Open without following links and check it is the file that was listed; hash up to cap."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if (st.st_dev, st.st_ino) != (expected.st_dev, expected.st_ino) or not stat.S_ISREG(st.st_mode):
            return "changed while collected"
        if st.st_nlink > 1:
            return "hardlink"
        digest, size = hashlib.sha256(), 0
        while chunk := handle.read(CHUNK):
            size += len(chunk)
            if size > cap:
                return "over cap"
            digest.update(chunk)
        return size, digest.hexdigest()


def collect(output_dir: Path, patterns: list[str], limits: Limits) -> Collection:
    """List and checksum the declared outputs, refusing what must not leave the sandbox."""
    result = Collection()
    total = 0
    for rel, st in _walk(output_dir):
        if not matches(rel, patterns):
            continue
        if not stat.S_ISREG(st.st_mode):
            result.refused.append(f"{rel} ({_kind(st.st_mode)})")
            continue
        if st.st_nlink > 1:
            result.refused.append(f"{rel} (hardlink)")
            continue
        if st.st_size > limits.file_bytes:
            result.over_cap = f"output {rel} is {st.st_size} bytes, over the per-file cap of {limits.file_bytes}"
            break
        hashed = _hash_file(output_dir / rel, st, limits.file_bytes)
        if hashed == "over cap":
            result.over_cap = f"output {rel} is over the per-file cap of {limits.file_bytes} bytes"
            break
        if isinstance(hashed, str):
            result.refused.append(f"{rel} ({hashed})")
            continue
        size, sha = hashed
        if total + size > limits.total_bytes:
            result.over_cap = f"outputs total more than the cap of {limits.total_bytes} bytes"
            break
        if len(result.files) >= limits.files:
            result.over_cap = f"more than {limits.files} output files"
            break
        total += size
        result.files.append(Collected(path=rel, size=size, sha256=sha, source=output_dir / rel))
    return result


def store(job_id: uuid.UUID, collected: Collected) -> None:
    """Copy one collected file into the store, as it was hashed."""
    key = output_key(job_id, collected.path)
    if default_storage.exists(key):
        default_storage.delete(key)
    fd = os.open(collected.source, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        default_storage.save(key, File(handle, name=collected.path))
