"""Filters every list shares (django-filter): a bad value is a 400, never silently ignored."""

import django_filters
from django import forms
from drf_spectacular.utils import extend_schema_field


class SlugFilter(django_filters.CharFilter):
    """An exact slug (a team's, an image's, a node's name): anything else is a bad value."""

    field_class = forms.SlugField


def when_filter(field_name: str, lookup_expr: str, label: str, help_text: str) -> django_filters.IsoDateTimeFilter:
    """An ISO 8601 date or date-time (a naive one is in the site's time zone). OpenAPI says string:
    `format: date-time` would refuse the dates."""
    when = django_filters.IsoDateTimeFilter(
        field_name=field_name, lookup_expr=lookup_expr, label=label, help_text=help_text
    )
    return extend_schema_field({"type": "string", "description": help_text})(when)
