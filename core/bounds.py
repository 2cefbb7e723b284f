"""The bounds of the numbers people send: each integer field of a form or serializer takes no more than its column
keeps. The ranges are PostgreSQL's whatever the database: SQLite would store any 64-bit integer (and raise
OverflowError past it), so a value past the column is refused at its field, in the same words, on both."""

from typing import TypedDict

from django import forms
from django.core.validators import MaxValueValidator
from django.db import models
from django.db.backends.base.operations import BaseDatabaseOperations


class Bounds(TypedDict):
    min_value: int
    max_value: int


RANGES: dict[str, tuple[int, int]] = BaseDatabaseOperations.integer_field_ranges
BIGINT_MAX = RANGES["BigIntegerField"][1]
# A number that is no column's (a count of rows, a sum of seconds, a byte offset): what a bigint holds.
COUNT = Bounds(min_value=0, max_value=BIGINT_MAX)


def column_bounds(model: type[models.Model], name: str, *, least: int | None = None) -> Bounds:
    """For a field carrying column `name`; `least` raises the minimum (a positive column's 0 where 1 is least)."""
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field), f"{model.__name__}.{name} is no column"
    low, high = RANGES[field.get_internal_type()]
    return Bounds(min_value=low if least is None else max(low, least), max_value=high)


def narrow(field: forms.IntegerField, most: int) -> None:
    """Lower a form field's maximum, its validator with it: two validators would say two limits of one value."""
    if field.max_value is not None and most >= field.max_value:
        return
    field.max_value = most
    field.validators = [v for v in field.validators if not isinstance(v, MaxValueValidator)]
    field.validators.append(MaxValueValidator(most))


def column_form_field(model: type[models.Model], name: str) -> forms.Field:
    """The form field a ModelForm makes of integer column `name`, bounded by the column (its own has no maximum)."""
    field = model._meta.get_field(name)
    assert isinstance(field, models.Field), f"{model.__name__}.{name} is no column"
    made = field.formfield(**column_bounds(model, name))
    assert made is not None
    return made
