"""API conventions shared by every endpoint: the error shape, and the request rates."""

from typing import TYPE_CHECKING, Any

from django import forms
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.contrib.django_filters import DjangoFilterExtension
from rest_framework import throttling
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core import ratelimit
from core.refusals import Refused, as_api_error
from e31site.request_body import BodyNotReceived
from jobs.submit.uploads import BODY_REFUSED, refused_body

if TYPE_CHECKING:  # DRF imports the throttles below while rest_framework.views is still loading
    from rest_framework.views import APIView


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus the errors Django and our own code raise, each in the API's shape."""
    if isinstance(exc, DjangoValidationError):
        exc = ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages})
    elif isinstance(exc, BODY_REFUSED):
        # Django's parser stops at its limits with these (a bare HTML 400 page otherwise).
        field, message = refused_body(exc)
        exc = ValidationError({field or "non_field_errors": [message]})
    elif isinstance(exc, BodyNotReceived):  # a body that stopped arriving: 400 in the API's shape
        exc = ParseError(str(exc))
    elif isinstance(exc, Refused):  # a submission refused (over budget, over quota…): its status and body
        exc = as_api_error(exc)
    return drf_exception_handler(exc, context)


class _WindowRate(throttling.SimpleRateThrottle):
    """DRF's throttle, its rate read when a request comes (DRF reads its own once) and its requests counted in
    a shared sliding window (core.ratelimit: one atomic round trip) rather than a list read and written back."""

    retry_after = 0.0

    def get_rate(self) -> str | None:
        return settings.E31_API_THROTTLE_RATES[self.scope or ""]

    def parse_rate(self, rate: str | None) -> tuple[int | None, int | None]:
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


# The statuses every endpoint of the API may answer besides its own (docs/api.md, "Errors"), and those
# of the endpoints that answer more: documented here once rather than on each view.
ERROR = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
    "description": '{"detail": "message"}',
}
FIELD_ERRORS = {
    "type": "object",
    "description": 'bad input: {"field": ["message", …]} (the request as a whole under non_field_errors), or '
    '{"detail": "message"} for a body that cannot be read',
}
RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds to wait"}}
EVERY_ENDPOINT = {
    400: ("Bad input: a parameter or field named with what is wrong.", FIELD_ERRORS, {}),
    401: ("No token, or a bad one.", ERROR, {"WWW-Authenticate": {"schema": {"type": "string"}}}),
    403: ("Not allowed (an operator's endpoint).", ERROR, {}),
    404: ("Not there, or not the caller's to see; a page past the end.", ERROR, {}),
    429: ("Too many requests.", ERROR, RETRY_AFTER),
}
MORE = {
    ("post", "/api/v1/jobs/"): {
        402: "Over the team's budget: code over_budget, with the figures.",
        409: "An Idempotency-Key whose job the caller can no longer see.",
        413: "The upload is too large.",
        422: "An Idempotency-Key sent before with a different request.",
    },
    ("post", "/api/v1/jobs/{id}/pin/"): {409: "Pinning is not allowed for this job or team."},
    ("post", "/api/v1/pool/nodes/{name}/drain/"): {409: "The node is offline."},
    ("post", "/api/v1/pool/nodes/{name}/resume/"): {409: "The node is offline."},
}


def document_errors(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular's hook: the error answers on every operation of /api/v1/; an operation of MORE the API
    does not have (a route renamed) stops the document, so its statuses are not dropped unsaid."""
    if unknown := [f"{method} {path}" for method, path in MORE if method not in result["paths"].get(path, {})]:
        raise ImproperlyConfigured(f"e31site.api.MORE names operations the API does not have: {', '.join(unknown)}")
    for path, operations in result["paths"].items():
        if not path.startswith("/api/v1/"):
            for operation in operations.values():
                operation["security"] = []  # the document itself is public
            continue
        for method, operation in operations.items():
            responses = operation["responses"]
            # An answer asked for as CSV (`format=csv`) says its errors in CSV too.
            also_csv = any("text/csv" in answer.get("content", {}) for answer in responses.values())
            for status, (description, schema, headers) in EVERY_ENDPOINT.items():
                answer: dict[str, Any] = {
                    "description": description,
                    "content": {"application/json": {"schema": schema}},
                }
                if status == 404:  # a URL no route matches is Django's own page
                    answer["content"]["text/html"] = {"schema": {"type": "string"}}
                if also_csv:
                    answer["content"]["text/csv"] = {"schema": {"type": "string"}}
                responses.setdefault(str(status), answer | ({"headers": headers} if headers else {}))
            for status, description in MORE.get((method, path), {}).items():
                responses.setdefault(
                    str(status),
                    {"description": description, "content": {"application/json": {"schema": {"type": "object"}}}},
                )
    return result


class FilterSchema(DjangoFilterExtension):
    """drf-spectacular's reading of FilterSets, with what their form fields refuse in the schema, so that a
    request the document allows is one the filter takes."""

    priority = 1

    def resolve_filter_field(
        self, auto_schema: Any, model: Any, filterset_class: Any, field_name: str, filter_field: Any
    ) -> list[dict[str, Any]]:
        parameters = super().resolve_filter_field(auto_schema, model, filterset_class, field_name, filter_field)
        for parameter in parameters:
            schema = parameter["schema"]
            if schema.get("format") == "uuid":  # as Django reads one: hex digits, dashes optional
                schema["pattern"] = r"^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$"
            if schema.get("type") != "string" or {"format", "anyOf", "enum"} & set(schema):
                continue
            if max_length := filter_field.extra.get("max_length"):
                schema["maxLength"] = max_length
            if issubclass(filter_field.field_class, forms.SlugField):
                schema["pattern"] = r"^[-a-zA-Z0-9_]+$"
            else:  # Django's form fields refuse a NUL character in any text
                schema["pattern"] = r"^[^\x00]*$"
        return parameters
