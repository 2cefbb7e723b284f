"""API conventions shared by every endpoint: the error shape, and the request rates."""

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import throttling
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core import ratelimit
from e31site.request_body import BodyNotReceived
from jobs.uploads import refused_body

if TYPE_CHECKING:  # DRF imports the throttles below while rest_framework.views is still loading
    from rest_framework.views import APIView


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus Django's ValidationError as a 400 in the API's shape: field errors by
    field, the rest under `non_field_errors`; a body that did not arrive as a 400 `detail`."""
    if isinstance(exc, DjangoValidationError):
        exc = ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages})
    elif isinstance(exc, (TooManyFilesSent, RequestDataTooBig, TooManyFieldsSent)):
        # Django's parser stops at its limits with these (a bare HTML 400 page otherwise).
        field, message = refused_body(exc)
        exc = ValidationError({field or "non_field_errors": [message]})
    elif isinstance(exc, BodyNotReceived):  # a body that stopped arriving: 400 in the API's shape
        exc = ParseError(str(exc))
    return drf_exception_handler(exc, context)


class _WindowRate(throttling.SimpleRateThrottle):
    """DRF's throttle with its rate read from settings.E31_API_THROTTLE_RATES when a request comes (DRF
    reads its own once), and its requests counted in a shared sliding window (core.ratelimit: one
    atomic round trip to Redis) rather than in a list it reads and writes back."""

    retry_after = 0.0

    def get_rate(self) -> str | None:
        return settings.E31_API_THROTTLE_RATES[self.scope or ""]

    def parse_rate(self, rate: str | None) -> tuple[int | None, int | None]:
        """DRF's own parse, called once as the throttle is made: the rate read as a window, once."""
        self.window = ratelimit.Window.parse(rate)
        return (self.window.limit, self.window.seconds) if self.window else (None, None)

    def allow_request(self, request: Request, view: "APIView") -> bool:
        key = self.get_cache_key(request, view) if self.window else None
        if self.window is None or key is None:
            return True
        self.retry_after = ratelimit.take(key, self.window)
        return not self.retry_after

    def wait(self) -> float | None:
        return self.retry_after


class AnonRateThrottle(_WindowRate, throttling.AnonRateThrottle):
    """Requests without credentials, per address (E31_API_RATE_ANON)."""


class UserRateThrottle(_WindowRate, throttling.UserRateThrottle):
    """Requests of a signed-in person, per person (E31_API_RATE_USER)."""
