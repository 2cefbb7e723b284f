"""DRF's ModelSerializer, with its fields built from the model once per class rather than per instance.

ModelSerializer.get_fields reads the model's fields and builds a serializer field for each (their
kinds, kwargs and validators) every time a serializer is made, then DRF deep-copies every field:
for a job's answer that was most of the time it took, on every submission and every list page.
The fields it builds depend only on the class (its Meta and declared fields: a subclass must not
make them depend on the instance or its context, which the first instance would fix for all), so
they are built once and each instance gets copies of its own, bound to it alone:

- a field with parts of its own (a child field, a nested serializer) or a default or initial value
  that is a container is deep-copied, as DRF does;
- any other is copied shallowly, with its own list of validators and its own error messages (the
  containers a serializer may add to): DRF fills the rest (choices, style) in a field's __init__ and
  only reads them afterwards, and binding a field to its serializer sets attributes on the copy.
"""

import copy
from typing import Any, TypeVar

from django.db.models import Model
from rest_framework import serializers

M = TypeVar("M", bound=Model)


class ModelSerializer(serializers.ModelSerializer[M]):
    _built_fields: dict[str, serializers.Field]

    def get_fields(self) -> dict[str, Any]:
        cls = type(self)
        if "_built_fields" not in cls.__dict__:  # this class's own, never a parent's
            cls._built_fields = super().get_fields()
        return {name: _copy(field) for name, field in cls._built_fields.items()}


def _copy(field: serializers.Field) -> serializers.Field:
    if _has_parts(field):
        return copy.deepcopy(field)
    copied = copy.copy(field)
    copied.validators = list(field.validators)
    copied.error_messages = dict(field.error_messages)
    return copied


def _has_parts(field: serializers.Field) -> bool:
    if isinstance(field, serializers.BaseSerializer) or hasattr(field, "child") or hasattr(field, "child_relation"):
        return True
    return any(isinstance(getattr(field, name, None), (list, dict, set)) for name in ("default", "initial"))
