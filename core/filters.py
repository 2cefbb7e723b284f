"""Filters every list shares (django-filter): a bad value is a 400, never silently ignored."""

from datetime import datetime
from typing import Any

import django_filters
from django import forms
from drf_spectacular.utils import extend_schema_field

from core.when import MOMENT_SCHEMA, in_utc


class SlugFilter(django_filters.CharFilter):
    """An exact slug (a team's, an image's, a node's name): anything else is a bad value."""

    field_class = forms.SlugField


class MomentField(django_filters.fields.IsoDateTimeField):
    """An ISO 8601 date or date-time, cleaned to UTC and taken into the calendar the site reads
    (core.when.in_utc): ISO 8601 allows offsets up to ±23:59, PostgreSQL only ±15:59, so a time written
    as 2000-01-01T00:00+16:00 would otherwise be a database error (a 500), and so would one that leaves
    the calendar once in UTC (9999-12-31T23:59-23:59)."""

    def to_python(self, value: Any) -> datetime | None:
        moment = super().to_python(value)
        return None if moment is None else in_utc(moment)


class WhenFilter(django_filters.IsoDateTimeFilter):
    """A moment, compared in UTC (MomentField)."""

    field_class = MomentField


def when_filter(field_name: str, lookup_expr: str, label: str, help_text: str) -> django_filters.IsoDateTimeFilter:
    """An ISO 8601 date or date-time (a naive one is in the site's time zone): OpenAPI says either format."""
    when = WhenFilter(field_name=field_name, lookup_expr=lookup_expr, label=label, help_text=help_text)
    return extend_schema_field({**MOMENT_SCHEMA, "description": help_text})(when)
