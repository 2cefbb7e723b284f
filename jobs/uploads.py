"""Upload limits, enforced while the request body is read so nothing over the limit hits the disk."""

from typing import Any

from django.conf import settings
from django.core.files.uploadhandler import StopUpload, TemporaryFileUploadHandler
from django.http import HttpRequest
from rest_framework.request import Request

REFUSED = "e31_upload_refused"


def refused_upload(request: HttpRequest | Request) -> str:
    """Why the upload of this request was refused ('' when it was not). Read after parsing."""
    return getattr(getattr(request, "_request", request), REFUSED, "")


class LimitedUploadHandler(TemporaryFileUploadHandler):
    """Stops reading files once one is over the per-file limit or all are over the per-job limit.

    It stops rather than raises, so the rest of the body is drained and the view answers 413.
    """

    def __init__(self, request: HttpRequest | None = None) -> None:
        super().__init__(request)
        self.request_bytes = 0
        self.file_bytes = 0
        self.name = ""

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


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):g} MB"
