"""DRF's ModelSerializer, with its fields built from the model once per class rather than per instance.

ModelSerializer.get_fields reads the model's fields and builds a serializer field for each (their
kinds, kwargs and validators) every time a serializer is made: for a job's answer that was most of
the time it took, on every submission and every page of a list. The fields it builds depend only
on the class (its Meta and declared fields), so they are built once and each instance gets its own
deep copy, as DRF gives each instance a copy of the declared fields: an instance may still change
its fields without touching another's.
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
        return copy.deepcopy(cls._built_fields)
