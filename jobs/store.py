"""The store: each job's staged data, outputs and log, through Django's storage API."""

import hashlib
import io
import re
import shutil
import unicodedata
import uuid
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from django.core.files import File
from django.core.files.storage import default_storage

_SAFE = re.compile(r"[^A-Za-z0-9._+-]")
MAX_NAME = 128


class BadFileName(ValueError):
    pass


def sanitize_name(raw: str) -> str:
    """A file name safe to place at /data/<name>: no folders, no `..`, no hidden or odd characters."""
    name = unicodedata.normalize("NFKC", raw or "")
    name = name.replace("\\", "/").split("/")[-1]  # keep the last path part only
    name = _SAFE.sub("_", name).lstrip(".-")
    if len(name) > MAX_NAME:  # cut the stem, not the extension the job's code looks for
        stem, dot, ext = name.rpartition(".")
        name = f"{stem[: MAX_NAME - len(ext) - 1]}.{ext}" if dot and stem and len(ext) <= 16 else name[:MAX_NAME]
    if not name or set(name) <= {"_", "."}:
        raise BadFileName(f"{raw!r} is not a usable file name")
    return name


def store_prefix(job_id: uuid.UUID) -> str:
    return f"jobs/{job_id}"


def data_key(job_id: uuid.UUID, name: str) -> str:
    return f"{store_prefix(job_id)}/data/{name}"


def blob_key(team_id: int | None, sha256: str) -> str:
    """The key of bytes kept once per owner by their sha256 (jobs.blobs): a team's, or the operators'."""
    owner = f"team-{team_id}" if team_id is not None else "operators"
    return f"blobs/{owner}/{sha256[:2]}/{sha256}"


def save_blob(key: str, content: File) -> None:
    """Write bytes at a blob's key, replacing what a write cut short left there."""
    if default_storage.exists(key):
        default_storage.delete(key)
    content.seek(0)
    saved = default_storage.save(key, content)
    if saved != key:  # another write of the same bytes won the key: they are there
        default_storage.delete(saved)


def blob_written(key: str, size: int) -> bool:
    """Whether a blob's bytes are whole at its key: the key names the sha256, so the size tells a cut-short write."""
    return default_storage.exists(key) and default_storage.size(key) == size


def delete_blob(key: str) -> None:
    default_storage.delete(key)


def output_key(job_id: uuid.UUID, path: str) -> str:
    """The key of the output at `path`: `\\` and `%` percent-encoded, as backends read a backslash as a folder."""
    escaped = path.replace("%", "%25").replace("\\", "%5C")
    return f"{store_prefix(job_id)}/output/{escaped}"


def save_output(job_id: uuid.UUID, path: str, content: File) -> None:
    """Keep one output at its key; a store that would rename it (its key is taken) refuses instead."""
    key = output_key(job_id, path)
    if default_storage.exists(key):
        default_storage.delete(key)
    saved = default_storage.save(key, content)
    if saved != key:
        default_storage.delete(saved)
        raise BadFileName(f"{path!r} could not be kept under its own name")


def log_key(job_id: uuid.UUID) -> str:
    return f"{store_prefix(job_id)}/log.txt"


def file_digest(upload: File) -> tuple[int, str]:
    """The size and sha256 of a file, read from its start; it is left at its start."""
    digest = hashlib.sha256()
    size = 0
    upload.seek(0)
    for chunk in upload.chunks():
        digest.update(chunk)
        size += len(chunk)
    upload.seek(0)
    return size, digest.hexdigest()


def save_upload(job_id: uuid.UUID, name: str, upload: File) -> tuple[int, str]:
    size, sha256 = file_digest(upload)
    saved = default_storage.save(data_key(job_id, name), upload)
    if saved != data_key(job_id, name):  # the store renamed it: names are unique per job, so never
        default_storage.delete(saved)
        raise BadFileName(f"{name!r} clashes with another file of this job")
    return size, sha256


def delete_stored(job_id: uuid.UUID) -> None:
    """Remove everything the store holds for a job (a submission failed half-way)."""
    _delete_tree(store_prefix(job_id))


def delete_data(job_id: uuid.UUID) -> None:
    _delete_tree(f"{store_prefix(job_id)}/data")


def delete_outputs(job_id: uuid.UUID) -> None:
    _delete_tree(f"{store_prefix(job_id)}/output")


def _delete_tree(prefix: str) -> None:
    location = getattr(default_storage, "location", None)
    if location:
        shutil.rmtree(Path(location) / prefix, ignore_errors=True)
        return
    folders, files = default_storage.listdir(prefix)
    for name in files:
        default_storage.delete(f"{prefix}/{name}")
    for folder in folders:
        _delete_tree(f"{prefix}/{folder}")


class _Pipe(io.RawIOBase):
    """Where zipfile writes and the response takes from, so the zip is never all in memory."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.position = 0

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.pieces.append(bytes(data))
        self.position += len(data)
        return len(data)

    def tell(self) -> int:
        return self.position

    def take(self) -> bytes:
        out, self.pieces = b"".join(self.pieces), []
        return out


def zip_stream(job_id: uuid.UUID, paths: Iterable[tuple[str, int]], chunk: int = 256 * 1024) -> Iterator[bytes]:
    """A job's outputs, given as (path, size), in one zip read a chunk at a time; stored, not deflated, so a
    zip costs no more than the reads."""
    pipe = _Pipe()
    with zipfile.ZipFile(pipe, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for path, size in paths:
            with (
                default_storage.open(output_key(job_id, path), "rb") as stored,
                archive.open(path.lstrip("/"), "w", force_zip64=size > 2**31) as entry,
            ):
                while piece := stored.read(chunk):
                    entry.write(piece)
                    yield pipe.take()
            yield pipe.take()
    yield pipe.take()
