"""API conventions shared by every endpoint."""

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DjangoValidationError):
        from rest_framework.exceptions import ValidationError

        exc = ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages})
    return drf_exception_handler(exc, context)
