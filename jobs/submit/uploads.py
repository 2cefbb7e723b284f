"""Upload limits, enforced before and while the request body is read so nothing over a limit hits the disk:
the declared length, then Django's parser's counts, then `LimitedUploadHandler` (docs/reference/storage.md)."""

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.core.files.uploadhandler import StopUpload, TemporaryFileUploadHandler
from django.http import HttpRequest, QueryDict
from django.http.multipartparser import MultiPartParser
from django.utils.datastructures import MultiValueDict
from rest_framework.request import Request

REFUSED = "e31_upload_refused"
UNNAMED = "e31_upload_unnamed"
FRAMING_BYTES = 1024  # the most a multipart part's boundary and headers take, counted per part
BodyRefused = TooManyFilesSent | TooManyFieldsSent | RequestDataTooBig
BODY_REFUSED = (TooManyFilesSent, TooManyFieldsSent, RequestDataTooBig)


def refused_upload(request: HttpRequest | Request) -> str:
    """Why the upload of this request was refused ('' when it was not). Read after parsing."""
    return getattr(_django(request), REFUSED, "")


def unnamed_files(request: HttpRequest | Request) -> list[str]:
    """The names of the files sent whose name is no name at all (`..`): Django's parser drops them, so
    without this a job would be submitted without a file its sender meant to stage. Read after parsing."""
    return list(getattr(_django(request), UNNAMED, []))


def body_limit() -> int:
    """The largest body a submission can have: the data files at the per-job limit, the other fields at
    Django's limit (DATA_UPLOAD_MAX_MEMORY_SIZE), and the framing of every part a body may have."""
    parts = settings.E31_UPLOAD_MAX_FILES + settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    return settings.E31_UPLOAD_JOB_MAX_BYTES + settings.DATA_UPLOAD_MAX_MEMORY_SIZE + parts * FRAMING_BYTES


def declared_too_large(request: HttpRequest) -> str:
    """Why a submission's declared length (Content-Length) is refused before its body is read; '' if not."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return ""  # Django reads such a body as empty
    if length <= body_limit():
        return ""
    return f"the upload ({_mb(length)}) is over the job's limit of {_mb(settings.E31_UPLOAD_JOB_MAX_BYTES)}"


def refused_body(exc: BodyRefused) -> tuple[str | None, str]:
    """The field (None: the submission as a whole) and the message for a body Django's parser refused."""
    if isinstance(exc, TooManyFilesSent):
        return "data", f"At most {settings.DATA_UPLOAD_MAX_NUMBER_FILES} data files."
    if isinstance(exc, TooManyFieldsSent):
        return None, f"At most {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} fields."
    return None, f"The fields other than the data files are over {_mb(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)} in all."


class NamingParser(MultiPartParser):
    """Django's multipart parser, except that a file whose name Django sanitizes to nothing (`..`, `a/.`,
    only unprintable characters) is recorded on the request (`unnamed_files`) rather than dropped unseen."""

    def __init__(self, *args: Any, request: HttpRequest, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.request = request

    def sanitize_file_name(self, file_name: str) -> str | None:
        name = super().sanitize_file_name(file_name)
        if name is None:  # called for non-empty names only: an empty file input sends none
            unnamed = getattr(self.request, UNNAMED, [])
            setattr(self.request, UNNAMED, [*unnamed, file_name])
        return name


class LimitedUploadHandler(TemporaryFileUploadHandler):
    """Stops reading files over the per-file or per-job limit; it stops rather than raises, so the rest of the
    body is drained and the view answers 413."""

    def __init__(self, request: HttpRequest | None = None) -> None:
        super().__init__(request)
        self.request_bytes = 0
        self.file_bytes = 0
        self.name = ""
        self.parsing = False

    def handle_raw_input(
        self, input_data: Any, META: dict[str, Any], content_length: int, boundary: str, encoding: str | None = None
    ) -> tuple[QueryDict, MultiValueDict] | None:
        """Parse the body with NamingParser (Django's and DRF's parsers both call this first); the
        parser calls it again, and is then left to parse (None)."""
        if self.request is None or self.parsing:
            return None
        self.parsing = True
        try:
            parser = NamingParser(META, input_data, self.request.upload_handlers, encoding, request=self.request)
            return parser.parse()
        finally:
            self.parsing = False

    def new_file(self, field_name: str, file_name: str, *args: Any, **kwargs: Any) -> None:
        self.file_bytes = 0
        self.name = file_name
        return super().new_file(field_name, file_name, *args, **kwargs)

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self.file_bytes += len(raw_data)
        self.request_bytes += len(raw_data)
        if self.file_bytes > settings.E31_UPLOAD_FILE_MAX_BYTES:
            self._refuse(f"{self.name} is over the per-file limit of {_mb(settings.E31_UPLOAD_FILE_MAX_BYTES)}")
        if self.request_bytes > settings.E31_UPLOAD_JOB_MAX_BYTES:
            self._refuse(f"the job's data is over the limit of {_mb(settings.E31_UPLOAD_JOB_MAX_BYTES)}")
        return super().receive_data_chunk(raw_data, start)

    def _refuse(self, message: str) -> None:
        if self.request is not None:
            setattr(self.request, REFUSED, message)
        if self.file is not None:
            self.file.close()
        raise StopUpload(connection_reset=False)


def _django(request: HttpRequest | Request) -> HttpRequest:
    return getattr(request, "_request", request)


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):g} MB"
