"""Filters every list shares (django-filter): a bad value is a 400, never silently ignored."""

from datetime import datetime
from typing import Any

import django_filters
from django import forms
from drf_spectacular.utils import extend_schema_field

from core.when import MOMENT_SCHEMA, ago, in_utc


class SlugFilter(django_filters.CharFilter):
    """An exact slug (a team's, an image's, a node's name): anything else is a bad value."""

    field_class = forms.SlugField


class MomentField(django_filters.fields.IsoDateTimeField):
    """An ISO 8601 moment through core.when.in_utc, so an offset PostgreSQL refuses is no 500; or a duration
    back from now (core.when.ago: `24h`, `7d`)."""

    def to_python(self, value: Any) -> datetime | None:
        if isinstance(value, str) and (back := ago(value)) is not None:
            return back
        moment = super().to_python(value)
        return None if moment is None else in_utc(moment)


class WhenFilter(django_filters.IsoDateTimeFilter):
    field_class = MomentField


def when_filter(field_name: str, lookup_expr: str, label: str, help_text: str) -> django_filters.IsoDateTimeFilter:
    """A moment filter whose OpenAPI schema says each form it takes."""
    when = WhenFilter(field_name=field_name, lookup_expr=lookup_expr, label=label, help_text=help_text)
    said = f"{help_text} Or a duration back from now, such as 24h or 7d."
    return extend_schema_field({**MOMENT_SCHEMA, "description": said})(when)
