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

An instance is then shown field by field as DRF shows it, except that a field of a kind `_conversion`
knows (DRF's own class, not a subclass) whose source is one of the model's own columns is read straight off
the instance and converted the way that field's `to_representation` would convert it: DRF's
`get_attribute` and its checks cost more than the conversion, and a list page shows thousands of such
values (bench/api.py). Anything else, or a value the fast conversion does not know, goes DRF's way.
How to show each field is planned once per class and time zone; only the fields shown DRF's way are
copied and bound for a serializer that shows an instance. A serializer whose `fields` were read (and
perhaps changed, as DRF allows), or whose class decides them in its own `get_fields`, is planned from
its own fields.
"""

import copy
from collections.abc import Callable, Mapping
from datetime import datetime, tzinfo
from typing import Any, TypeVar, cast

from django.conf import settings
from django.db.models import Model
from django.utils import timezone
from rest_framework import serializers
from rest_framework.fields import SkipField
from rest_framework.relations import PKOnlyObject
from rest_framework.settings import api_settings

M = TypeVar("M", bound=Model)


class ModelSerializer(serializers.ModelSerializer[M]):
    _built_fields: dict[str, serializers.Field]
    _deep_fields: frozenset[str]  # those with parts of their own (_has_parts)
    _plans: "dict[object, list[PlanEntry]]"  # the class's, by time zone (NO_ZONE: one for every zone)
    _steps: "tuple[Any, object, list[Step]]"  # an instance's: the fields it was made from, its zone, the steps

    def get_fields(self) -> dict[str, Any]:
        built = self._class_fields()
        return {name: self._copy(name, field) for name, field in built.items()}

    def _class_fields(self) -> dict[str, serializers.Field]:
        cls = type(self)
        if "_built_fields" not in cls.__dict__:  # this class's own, never a parent's
            built = super().get_fields()
            # Deep ones first: a thread that sees this class's fields must not read its parent's deep ones.
            cls._deep_fields = frozenset(name for name, field in built.items() if _has_parts(field))
            cls._built_fields = built
        return cls._built_fields

    def _copy(self, name: str, field: serializers.Field) -> serializers.Field:
        return copy.deepcopy(field) if name in type(self)._deep_fields else _shallow_copy(field)

    def to_representation(self, instance: M) -> dict[str, Any]:
        if not isinstance(instance, self.Meta.model):  # a mapping, say: DRF's way
            return super().to_representation(instance)
        shown: dict[str, Any] = {}
        for name, column, convert, field in self._current_plan():
            if convert is not None:
                value = getattr(instance, column)
                shown[name] = None if value is None else convert(value)
                continue
            try:  # DRF's Serializer.to_representation, for one field
                attribute = field.get_attribute(instance)
            except SkipField:
                continue
            check_for_none = attribute.pk if isinstance(attribute, PKOnlyObject) else attribute
            shown[name] = None if check_for_none is None else field.to_representation(attribute)
        return shown

    def _current_plan(self) -> "list[Step]":
        """The plan with this serializer's own fields for those shown DRF's way: made from the class's
        plan once per serializer (a list page's rows share it), or from the instance's `fields` when
        they were read (and may have been changed, as DRF allows); made again if the time zone its
        datetime conversions keep is no longer the current one."""
        # DRF's cached_property `fields` is in __dict__ once read; a class with a get_fields of its own
        # decides its fields itself: either way the plan is made from them.
        own = "fields" in self.__dict__ or type(self).get_fields is not ModelSerializer.get_fields
        fields = self.fields if own else None
        known = self.__dict__.get("_steps")
        if known is not None and known[0] is fields and (known[1] is NO_ZONE or known[1] == _zone()):
            return known[2]
        plan, zone = _plan(fields, self.Meta.model) if fields is not None else self._class_plan()
        steps = [(name, column, convert, None if convert else self._field(name)) for name, column, convert in plan]
        self._steps = (fields, zone, steps)
        return steps

    def _class_plan(self) -> "tuple[list[PlanEntry], object]":
        """The class's plan for the current time zone (or for any, when it shows no datetime its own
        way), made once from the fields as built: those with parts of their own go DRF's way."""
        cls = type(self)
        plans = cls.__dict__.get("_plans")
        if plans is None:
            plans = cls._plans = {}
        if NO_ZONE in plans:
            return plans[NO_ZONE], NO_ZONE
        zone = _zone()
        if zone not in plans:
            plan, kept = _plan(self._class_fields(), self.Meta.model, slow=cls._deep_fields)
            plans[kept] = plan
            return plan, kept
        return plans[zone], zone

    def _field(self, name: str) -> serializers.Field:
        """The field `name` bound to this serializer: built for it alone unless all its fields were."""
        if "fields" in self.__dict__:
            return self.fields[name]
        bound = self.__dict__.setdefault("_bound_fields", {})
        if name not in bound:
            bound[name] = self._copy(name, self._class_fields()[name])
            bound[name].bind(field_name=name, parent=self)
        return bound[name]


NO_ZONE = object()


def _zone() -> tzinfo | None:
    return timezone.get_current_timezone() if settings.USE_TZ else None


Convert = Callable[[Any], Any]
PlanEntry = tuple[str, str, Convert | None]  # the field's name, the column it shows, its fast conversion
Step = tuple[str, str, Convert | None, Any]  # and the serializer's own field, where it goes DRF's way


def _plan(
    fields: Mapping[str, serializers.Field], model: type[Model], *, slow: frozenset[str] = frozenset()
) -> "tuple[list[PlanEntry], object]":
    """Each readable field with its fast conversion, or None where it goes DRF's way (always for the
    names in `slow`); and the time zone the plan's datetime conversions keep (NO_ZONE: they keep none).
    DRF reads the current time zone for each value; a plan is made once per time zone."""
    columns = {f.attname for f in model._meta.concrete_fields if not f.is_relation}
    plan: list[PlanEntry] = []
    zoned = False
    for name, field in fields.items():
        if field.write_only:
            continue
        source = field.source or name  # a field as built is not bound yet: binding makes its name the source
        column = source if isinstance(source, str) and source in columns and name not in slow else ""
        convert = _conversion(field) if column else None
        zoned = zoned or (type(field) is serializers.DateTimeField and convert is not None)
        plan.append((name, column, convert))
    return plan, (_zone() if zoned else NO_ZONE)


def _conversion(field: serializers.Field) -> Convert | None:
    """What `field.to_representation` does to a value that is not None, for the usual values of the
    plain fields; for any other value it calls `field.to_representation` itself."""
    if type(field) is serializers.CharField:
        return str
    if type(field) is serializers.IntegerField:
        return int
    if type(field) is serializers.UUIDField:
        return str if field.uuid_format == "hex_verbose" else None
    if type(field) is serializers.BooleanField:
        return lambda v: v if v is True or v is False else field.to_representation(v)
    if type(field) is serializers.ChoiceField:
        choices = field.choice_strings_to_values
        return lambda v: choices.get(v, v) if type(v) is str and v else field.to_representation(v)
    if type(field) is serializers.JSONField:
        return None if field.binary else _same
    if type(field) is serializers.DateTimeField:
        return _datetime_conversion(field)
    return None


def _same(value: Any) -> Any:
    return value


def _datetime_conversion(field: serializers.DateTimeField) -> Convert | None:
    output_format = getattr(field, "format", api_settings.DATETIME_FORMAT)
    zone = cast(tzinfo | None, field.timezone if hasattr(field, "timezone") else field.default_timezone())
    if output_format is None or output_format.lower() != "iso-8601" or zone is None:
        return None

    def convert(value: Any) -> Any:
        if type(value) is datetime and value.utcoffset() is not None:
            try:
                text = value.astimezone(zone).isoformat()
            except OverflowError:
                return field.to_representation(value)  # DRF's own error
            return text[:-6] + "Z" if text.endswith("+00:00") else text
        return field.to_representation(value)

    return convert


def _shallow_copy(field: serializers.Field) -> serializers.Field:
    """copy.copy(field) without its generic machinery (a DRF field has no __copy__, __reduce__ or
    __setstate__ of its own, so copy.copy does just this), with its own validators and error messages."""
    copied = type(field).__new__(type(field))
    copied.__dict__.update(field.__dict__)
    copied.validators = list(field.validators)
    copied.error_messages = dict(field.error_messages)
    return copied


def _has_parts(field: serializers.Field) -> bool:
    if isinstance(field, serializers.BaseSerializer) or hasattr(field, "child") or hasattr(field, "child_relation"):
        return True
    return any(isinstance(getattr(field, name, None), (list, dict, set)) for name in ("default", "initial"))
