"""The store: every read and write of a job's staged data, outputs and log, of a template's blobs and of a
probe's outputs, through Django's default storage, which no other module names (tests/test_store_boundary.py).

One wrapper module, not a `Storage` subclass: the backend stays whatever `E31_STORE_BACKEND` names (the file
system, django-storages' S3, any other), which a subclass would fix or would have to proxy whole; and what
callers ask for is by purpose (a byte range of a log, the start of an output, a stream, a replace, a tree
deleted), where S3 is best asked with requests of its own that the Storage API has no word for.
"""

import errno
import hashlib
import io
import logging
import re
import shutil
import unicodedata
import uuid
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import IO

from boto3.exceptions import Boto3Error
from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, default_storage
from django.utils.http import content_disposition_header
from storages.backends.s3 import S3Storage
from storages.utils import clean_name

log = logging.getLogger(__name__)

_SAFE = re.compile(r"[^A-Za-z0-9._+-]")
MAX_NAME = 128


class BadFileName(ValueError):
    pass


class StoreUnavailable(OSError):
    """The store failed a read or a write (away, or refusing): not the file's fault; try again later."""

    def __init__(self, why: str) -> None:
        super().__init__(errno.EIO, f"the store failed: {why}")

    def __str__(self) -> str:
        return self.strerror or ""


# What a backend raises when the store fails: the file system's errors, and S3's (boto3's and botocore's).
STORE_ERRORS = (OSError, BotoCoreError, ClientError, Boto3Error)


@contextmanager
def answering() -> Iterator[None]:
    """Raise a store's failure as StoreUnavailable, in words without keys or endpoints (a missing file stays
    FileNotFoundError)."""
    try:
        yield
    except (StoreUnavailable, FileNotFoundError):
        raise
    except STORE_ERRORS as exc:
        raise StoreUnavailable(_why(exc)) from exc


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, ClientError) or isinstance(cause, ClientError):
        error = (exc if isinstance(exc, ClientError) else cause).response.get("Error", {})  # type: ignore[union-attr]
        return f"it answered {error.get('Code', 'an error')}"
    return "it did not answer"


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
    """The key of bytes kept once per owner by their sha256 (jobs.storage.blobs): a team's, or the operators'."""
    owner = f"team-{team_id}" if team_id is not None else "operators"
    return f"blobs/{owner}/{sha256[:2]}/{sha256}"


def _save_replacing(key: str, content: File) -> str:
    """Write `content` at `key` in place of what is there; the key the store saved it at."""
    if default_storage.exists(key):
        default_storage.delete(key)
    saved = default_storage.save(key, content)
    if saved != key:
        default_storage.delete(saved)
    return saved


@answering()
def save_blob(key: str, content: File) -> None:
    """Write bytes at a blob's key, replacing what a write cut short left there; another write of the same bytes
    that won the key meanwhile leaves them there."""
    content.seek(0)
    _save_replacing(key, content)


@answering()
def blob_written(key: str, size: int) -> bool:
    """Whether a blob's bytes are whole at its key: the key names the sha256, so the size tells a cut-short write."""
    return default_storage.exists(key) and default_storage.size(key) == size


@answering()
def exists(key: str) -> bool:
    return default_storage.exists(key)


@answering()
def size(key: str) -> int:
    return default_storage.size(key)


@answering()
def delete(key: str) -> None:
    default_storage.delete(key)


@answering()
def replace(key: str, content: bytes) -> None:
    _save_replacing(key, ContentFile(content))


@answering()
def open_file(key: str, name: str) -> File:
    """A stored file as a File named `name`, to copy whole (a job's data file submitted again, or kept as a
    template's); FileNotFoundError when it is not in the store."""
    stored = default_storage.open(key, "rb")
    stored.open("rb")  # S3's file downloads the object here, not at its first read: a failure is answered here
    return File(stored, name)


def output_key(job_id: uuid.UUID, path: str) -> str:
    """The key of the output at `path`: `\\` and `%` percent-encoded, as backends read a backslash as a folder."""
    escaped = path.replace("%", "%25").replace("\\", "%5C")
    return f"{store_prefix(job_id)}/output/{escaped}"


@answering()
def save_output(job_id: uuid.UUID, path: str, content: File) -> None:
    """Keep one output at its key; a store that would rename it (its key is taken) refuses instead."""
    if _save_replacing(output_key(job_id, path), content) != output_key(job_id, path):
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
    """Store an uploaded file from its temporary file (S3: in parts past E31_STORE_MULTIPART_MB)."""
    size, sha256 = file_digest(upload)
    with answering():
        saved = default_storage.save(data_key(job_id, name), upload)
    if saved != data_key(job_id, name):  # the store renamed it: names are unique per job, so never
        delete(saved)
        raise BadFileName(f"{name!r} clashes with another file of this job")
    return size, sha256


def delete_stored(job_id: uuid.UUID) -> None:
    """Remove everything the store holds for a job (a submission failed half-way); a store that fails
    meanwhile keeps what it has (no job names it), and the submission's own error is what is said."""
    try:
        _delete_tree(store_prefix(job_id))
    except StoreUnavailable:
        log.warning("the store failed removing what a failed submission left under %s", store_prefix(job_id))


def delete_data(job_id: uuid.UUID) -> None:
    _delete_tree(f"{store_prefix(job_id)}/data")


def delete_outputs(job_id: uuid.UUID) -> None:
    _delete_tree(f"{store_prefix(job_id)}/output")


@answering()
def _delete_tree(prefix: str) -> None:
    if isinstance(default_storage, FileSystemStorage):
        shutil.rmtree(Path(default_storage.location) / prefix, ignore_errors=True)
        return
    if isinstance(default_storage, S3Storage):  # a thousand keys a request
        answers = default_storage.bucket.objects.filter(Prefix=_s3_name(prefix) + "/").delete()
        if refused := [error for answer in answers for error in answer.get("Errors", [])]:
            # Each key is answered on its own: a request that succeeded may still have left some behind.
            raise StoreUnavailable(f"it kept {len(refused)} of the files ({refused[0].get('Code', 'an error')})")
        return
    folders, files = default_storage.listdir(prefix)
    for name in files:
        default_storage.delete(f"{prefix}/{name}")
    for folder in folders:
        _delete_tree(f"{prefix}/{folder}")


def _s3_name(key: str) -> str:
    """The object's name in the bucket: the key under the store's `location`."""
    return default_storage._normalize_name(clean_name(key))  # type: ignore[attr-defined]


@answering()
def open_stream(key: str, *, stop: int = 0) -> IO[bytes]:
    """A stored file (its first `stop` bytes, when given) to read from its start a piece at a time: from S3, the
    object's own body, of that range only (the backend's file would first download it whole, into memory)."""
    if not isinstance(default_storage, S3Storage):
        return default_storage.open(key, "rb")
    answer = _get_object(key, f"bytes=0-{stop - 1}" if stop else "")
    return answer["Body"] if answer is not None else io.BytesIO()  # None: a range past the end


def _get_object(key: str, byte_range: str = "") -> dict | None:
    """S3's GetObject answer for a stored file, or for a range of its bytes (`bytes=0-99`, `bytes=-100`: RFC
    9110); None when the range starts past the object's end."""
    assert isinstance(default_storage, S3Storage), "asked of an S3 store only"
    try:
        return default_storage.bucket.Object(_s3_name(key)).get(**({"Range": byte_range} if byte_range else {}))
    except ClientError as exc:
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status == 404:
            raise FileNotFoundError(f"{key} is not in the store") from None
        if status == 416 and byte_range:  # Range Not Satisfiable: past the end, or an empty object
            return None
        raise


def _ranged(answer: dict | None) -> tuple[bytes, int]:
    """A ranged GetObject's bytes and where they start in the object (a server that ignored the range and
    sent the whole object: all of it, from 0)."""
    if answer is None:
        return b"", 0
    with closing(answer["Body"]) as body:
        data = body.read()
    started = re.match(r"bytes (\d+)-", answer.get("ContentRange") or "")
    return data, int(started[1]) if started else 0


@answering()
def read_range(key: str, start: int, length: int) -> bytes:
    """At most `length` bytes of a stored file from byte `start` (none from its end on): from S3 a GET of
    that range only, never the whole object (the backend's file would download it whole first)."""
    if length <= 0:
        return b""
    if isinstance(default_storage, S3Storage):
        data, at = _ranged(_get_object(key, f"bytes={start}-{start + length - 1}"))
        return data[start - at : start - at + length]
    if start >= default_storage.size(key):  # a seek far past the end is EINVAL on ext4
        return b""
    with default_storage.open(key, "rb") as stored:
        stored.seek(start)
        return stored.read(length)


@answering()
def read_tail(key: str, length: int) -> tuple[bytes, int]:
    """A stored file's last `length` bytes (all of it when it is shorter) and where they start: from S3 one
    GET of that suffix range, never the whole object."""
    if length <= 0:
        return b"", default_storage.size(key)
    if isinstance(default_storage, S3Storage):
        data, at = _ranged(_get_object(key, f"bytes=-{length}"))
        return data[-length:], at + max(0, len(data) - length)
    start = max(0, default_storage.size(key) - length)
    with default_storage.open(key, "rb") as stored:
        stored.seek(start)
        return stored.read(length), start


def read_blocks(key: str, *, stop: int, block: int = 1024 * 1024) -> Iterator[bytes]:
    """A stored file's first `stop` bytes (fewer when it is shorter) a block at a time: from S3 one GET of
    that range. FileNotFoundError at the first block when it is not in the store, StoreUnavailable at any."""
    if stop <= 0:
        return
    with open_stream(key, stop=stop) as stored:
        left = stop
        while left > 0:
            with answering():
                piece = stored.read(min(block, left))
            if not piece:
                return
            left -= len(piece)
            yield piece


def fetch(key: str, target: IO[bytes], chunk: int = 1024 * 1024) -> tuple[int, str]:
    """Copy a stored file into `target` a piece at a time; its size and sha256. StoreUnavailable when the
    store fails on the way (an OSError of `target` is its own)."""
    digest, size = hashlib.sha256(), 0
    with open_stream(key) as source:
        while True:
            with answering():
                piece = source.read(chunk)
            if not piece:
                return size, digest.hexdigest()
            target.write(piece)
            digest.update(piece)
            size += len(piece)


def store_secrets() -> list[str]:
    """What a job must not learn of the store: a file-system store's folder, or an object store's keys and
    endpoint (its location is a key prefix, too common a word to look for)."""
    if isinstance(default_storage, FileSystemStorage):
        return [str(default_storage.location)]
    found = [getattr(default_storage, name, None) for name in ("access_key", "secret_key", "endpoint_url")]
    return [str(value) for value in found if value]


def presigned_url(key: str, *, size: int, filename: str) -> str | None:
    """A short-lived URL of the store for a download this big (E31_PRESIGN_OVER_MB), saved as an attachment
    whatever the file is; None when it is smaller or the store cannot presign (the file system, or an S3
    store set to serve unsigned URLs: `querystring_auth` off or a `custom_domain`)."""
    over = settings.E31_PRESIGN_OVER_BYTES
    if not over or size < over or not isinstance(default_storage, S3Storage):
        return None
    if not default_storage.querystring_auth or default_storage.custom_domain:
        return None  # its URLs would be unsigned and never expire: stream it instead
    answer = {
        "ResponseContentDisposition": content_disposition_header(True, filename),
        "ResponseContentType": "application/octet-stream",
    }
    return default_storage.url(key, parameters=answer, expire=settings.E31_PRESIGN_EXPIRY_S)


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
                open_stream(output_key(job_id, path)) as stored,
                archive.open(path.lstrip("/"), "w", force_zip64=size > 2**31) as entry,
            ):
                while piece := stored.read(chunk):
                    entry.write(piece)
                    yield pipe.take()
            yield pipe.take()
    yield pipe.take()
