"""Output collection: what a job left under /output, taken by the host without trusting it (no link followed,
hardlinks and special files refused, a name that cannot be kept refused by itself)."""

import hashlib
import os
import stat
import unicodedata
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.core.files.base import File

from jobs.lifecycle.inputs import matches
from jobs.storage.store import output_key, save_output

CHUNK = 1024 * 1024
# A kept output's store key fits an object store's key (S3) and each part a file name; the walk goes
# no deeper, so no host path it builds is too long for the host however deep the job nested.
KEY_MAX_BYTES = 1024
NAME_MAX_BYTES = 255
PATH_MAX_BYTES = KEY_MAX_BYTES - len(output_key(uuid.UUID(int=0), "").encode())
# Characters that would let a name break a line or display as another name: no kept name has them.
UNPRINTABLE = {"Cc", "Zl", "Zp"}
BIDI_CONTROLS = {chr(c) for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]}


@dataclass(frozen=True)
class Limits:
    file_bytes: int
    total_bytes: int
    files: int


@dataclass
class Collected:
    path: str
    size: int  # its apparent size: what the store will hold, holes written out as zeros
    sha256: str
    source: Path
    allocated: int = 0  # the bytes of the blocks it has on the node (fewer than its size: sparse)

    @property
    def sparse(self) -> bool:
        return self.allocated < self.size


@dataclass
class Collection:
    files: list[Collected] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # "path (why)"
    over_cap: str = ""  # why collection stopped, empty when within the caps


def _not_a_file(st: os.stat_result) -> str:
    """Why an entry is not a file to keep ("" for a regular file with one name)."""
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return "hardlink" if st.st_nlink > 1 else ""
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "not a regular file"


def shown(path: str) -> str:
    r"""A path as one line of valid text: a backslash doubled, what would break it escaped (`\n`, `\xff`)."""
    parts = []
    for char in path:
        if char == "\\":
            parts.append("\\\\")
        elif "\udc80" <= char <= "\udcff":
            parts.append(f"\\x{ord(char) - 0xDC00:02x}")
        elif _breaks_a_name(char):
            parts.append(char.encode("unicode_escape").decode("ascii"))
        else:
            parts.append(char)
    return "".join(parts)


def _breaks_a_name(char: str) -> bool:
    return unicodedata.category(char) in UNPRINTABLE or char in BIDI_CONTROLS


def name_problem(path: str) -> str:
    """Why an output cannot be kept under its name ("" when it can: a page URL, an API URL, a download name)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "name is not UTF-8"
    if any(_breaks_a_name(char) for char in path):
        return "name has control characters"
    key = output_key(uuid.UUID(int=0), path)
    if len(key.encode()) > KEY_MAX_BYTES:
        return f"path too long to keep: over {PATH_MAX_BYTES} bytes, a backslash or % counting 3"
    if any(len(part.encode()) > NAME_MAX_BYTES for part in key.split("/")):
        return f"name too long to keep: over {NAME_MAX_BYTES} bytes, a backslash or % counting 3"
    return ""


def _walk(root: Path) -> Iterator[tuple[str, os.stat_result | str]]:
    """(relative path, lstat or why unreadable) for every entry below root, never entering a symlink."""
    stack = [""]
    while stack:
        prefix = stack.pop()
        try:
            with os.scandir(root / prefix if prefix else root) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            yield prefix or "./", f"unreadable folder: {exc.strerror}"
            continue
        for entry in entries:
            rel = prefix + entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                yield rel, f"unreadable: {exc.strerror}"
                continue
            if not stat.S_ISDIR(st.st_mode):
                yield rel, st
            elif len(os.fsencode(rel + "/x")) > PATH_MAX_BYTES:
                yield rel + "/", f"folder too deep: no path below it fits in {PATH_MAX_BYTES} bytes"
            else:
                stack.append(rel + "/")


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
        try:
            while chunk := handle.read(CHUNK):
                size += len(chunk)
                if size > cap:
                    return "over cap"
                digest.update(chunk)
        except OSError as exc:
            return f"unreadable: {exc.strerror}"
        return size, digest.hexdigest()


def collect(output_dir: Path, patterns: list[str], limits: Limits) -> Collection:
    """List and checksum the declared outputs, refusing what must not leave the sandbox."""
    result = Collection()
    total = 0
    for rel, st in _walk(output_dir):
        # An unreadable folder is named whatever the patterns, as its files might match.
        if not matches(rel, patterns) and not (isinstance(st, str) and rel.endswith("/")):
            continue
        problem = st if isinstance(st, str) else _not_a_file(st) or name_problem(rel)
        if isinstance(st, str) or problem:
            result.refused.append(f"{shown(rel)} ({problem})")
            continue
        if st.st_size > limits.file_bytes:
            result.over_cap = f"output {shown(rel)} is {st.st_size} bytes, over the per-file cap of {limits.file_bytes}"
            break
        hashed = _hash_file(output_dir / rel, st, limits.file_bytes)
        if hashed == "over cap":
            result.over_cap = f"output {shown(rel)} is over the per-file cap of {limits.file_bytes} bytes"
            break
        if isinstance(hashed, str):
            result.refused.append(f"{shown(rel)} ({hashed})")
            continue
        size, sha = hashed
        if total + size > limits.total_bytes:
            result.over_cap = f"outputs total more than the cap of {limits.total_bytes} bytes"
            break
        if len(result.files) >= limits.files:
            result.over_cap = f"more than {limits.files} output files"
            break
        total += size
        result.files.append(Collected(rel, size, sha, source=output_dir / rel, allocated=st.st_blocks * 512))
    return result


def sparse_note(files: list[Collected], *, named: int = 5) -> str:
    """What the log says of the sparse outputs ("" when none is): they count at their apparent size."""
    sparse = [f for f in files if f.sparse]
    if not sparse:
        return ""
    listed = ", ".join(f"{shown(f.path)} ({f.size} bytes, {f.allocated} allocated)" for f in sparse[:named])
    more = f" and {len(sparse) - named} more" if len(sparse) > named else ""
    return f"sparse outputs, counted and stored at their apparent size: {listed}{more}"


def store(job_id: uuid.UUID, collected: Collected) -> None:
    fd = os.open(collected.source, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        save_output(job_id, collected.path, File(handle, name=collected.path.rsplit("/", 1)[-1]))


def in_job_terms(exc: BaseException) -> str:
    """What went wrong, without the host paths or store keys an exception's text carries."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return "the store refused it"
