"""Filters every list shares (django-filter): a bad value is a 400, never silently ignored."""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field

from core.when import MOMENT_SCHEMA, in_utc, parse_moment


class SlugFilter(django_filters.CharFilter):
    field_class = forms.SlugField


class MomentField(django_filters.fields.IsoDateTimeField):
    """A `since` or an `until` wherever one is read, by core.when.parse_moment, so every one takes the same values
    and refuses the others alike."""

    def to_python(self, value: Any) -> datetime | None:
        if value in self.empty_values:
            return None
        if isinstance(value, datetime):
            return in_utc(value)
        moment = parse_moment(str(value).strip())
        if moment is None:
            raise ValidationError(self.error_messages["invalid"], code="invalid")
        return moment


class MomentInput(forms.DateTimeInput):
    """A day and a time in the viewer's zone (a browser's own picker, no script); a value sent another way is
    shown as the moment MomentField reads, and a bad one as it came, beside its error."""

    input_type = "datetime-local"

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        if isinstance(value, str) and value.strip() and parse_moment(value.strip()) is None:
            context["widget"]["type"] = "text"  # a browser empties a datetime-local box of a bad value
        return context

    def format_value(self, value: Any) -> str | None:
        if isinstance(value, str):
            value = parse_moment(value.strip()) or value
        if not isinstance(value, datetime):
            return super().format_value(value)
        try:
            value = timezone.localtime(value)
        except OverflowError:  # the calendar's edge moved past it by the zone: as kept, in UTC
            pass
        return value.replace(tzinfo=None).isoformat(timespec="minutes")


class MomentRange(forms.Form):
    since = MomentField(required=False)
    until = MomentField(required=False)


class BadMoments(ValueError):
    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__(str(errors))
        self.errors = errors


def moment_range(params: Mapping[str, Any]) -> tuple[datetime | None, datetime | None]:
    """`since` and `until` of a query (None: not given), else BadMoments."""
    window = MomentRange(params)
    if not window.is_valid():
        errors = window.errors.get_json_data()
        raise BadMoments({name: [error["message"] for error in found] for name, found in errors.items()})
    return window.cleaned_data["since"], window.cleaned_data["until"]


class WhenFilter(django_filters.IsoDateTimeFilter):
    field_class = MomentField


def when_filter(field_name: str, lookup_expr: str, label: str, help_text: str) -> django_filters.IsoDateTimeFilter:
    """A moment filter whose OpenAPI schema says each form it takes."""
    when = WhenFilter(field_name=field_name, lookup_expr=lookup_expr, label=label, help_text=help_text)
    said = f"{help_text} Or a duration back from now, such as 24h or 7d."
    return extend_schema_field({**MOMENT_SCHEMA, "description": said})(when)
