"""API conventions shared by every endpoint: the error shape, and the request rates."""

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import throttling
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from jobs.uploads import refused_body


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus Django's ValidationError as a 400 in the API's shape: field errors by
    field, the rest under `non_field_errors`."""
    if isinstance(exc, DjangoValidationError):
        exc = ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages})
    elif isinstance(exc, (TooManyFilesSent, RequestDataTooBig, TooManyFieldsSent)):
        # Django's parser stops at its limits with these (a bare HTML 400 page otherwise).
        field, message = refused_body(exc)
        exc = ValidationError({field or "non_field_errors": [message]})
    return drf_exception_handler(exc, context)


class _SettingsRate:
    """Rates read from settings.E31_API_THROTTLE_RATES when a request comes (DRF reads its own once)."""

    scope: str | None

    def get_rate(self) -> str | None:
        return settings.E31_API_THROTTLE_RATES[self.scope or ""]


class AnonRateThrottle(_SettingsRate, throttling.AnonRateThrottle):
    """Requests without credentials, per address (E31_API_RATE_ANON)."""


class UserRateThrottle(_SettingsRate, throttling.UserRateThrottle):
    """Requests of a signed-in person, per person (E31_API_RATE_USER)."""
