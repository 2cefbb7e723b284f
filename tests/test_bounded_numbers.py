"""Every number people send has bounds: each integer field of every form, serializer and FilterSet of the apps
has a minimum and a maximum (a decimal its digits; a float that takes a value its minimum and maximum), every
paged list's page number too, and the OpenAPI document shows them on every integer of a request body and query.
A field without them fails here by its class and name."""

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import django_filters
import pytest
from django import forms
from django.apps import apps
from django.conf import settings
from django.test import Client
from rest_framework import serializers
from rest_framework.pagination import BasePagination

from jobs.submit.forms import ArrayForm, JobForm
from jobtemplates.forms import TemplateRunForm
from jobtemplates.models import JobTemplate
from ops.forms import NodeActionForm
from pool.admin import NodeFeaturesForm
from schedules.forms import ScheduleForm
from tests.factories import RuntimeImageFactory
from webhooks.forms import WebhookForm

ROOT = Path(settings.BASE_DIR).resolve()


def app_modules() -> list[ModuleType]:
    """Every module of the project's apps and of core, but their migrations."""
    packages = ["core", *(c.name for c in apps.get_app_configs() if Path(c.path).resolve().parent == ROOT)]
    found = []
    for name in packages:
        package = importlib.import_module(name)
        found.append(package)
        found += [
            importlib.import_module(info.name)
            for info in pkgutil.walk_packages(package.__path__, f"{name}.")
            if ".migrations" not in info.name
        ]
    return found


def classes(base: type) -> list[type]:
    """The subclasses of `base` defined in the apps' modules, each once."""
    seen: dict[str, type] = {}
    for module in app_modules():
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, base) and value.__module__ == module.__name__:
                seen[f"{value.__module__}.{value.__qualname__}"] = value
    return [seen[name] for name in sorted(seen)]


def test_the_walk_finds_the_forms_serializers_filters_and_pages_of_every_app():
    found = {c.__name__ for c in [*classes(forms.BaseForm), *classes(serializers.BaseSerializer)]}
    found |= {c.__name__ for c in [*classes(django_filters.FilterSet), *classes(BasePagination)]}

    assert {"JobForm", "ArrayForm", "TemplateRunForm", "ScheduleForm", "WebhookForm", "StoreQuotaForm"} <= found
    assert {"EstimateRequest", "ScheduleRequest", "PreferenceSerializer", "RecordSerializer", "LogQuery"} <= found
    assert {"JobFilter", "RecordFilter", "TokenFilter", "CappedCountPagination", "CSVPagination"} <= found


# --- what a field lacks ----------------------------------------------------------------------------------


NUMBERS = (forms.IntegerField, forms.FloatField, forms.DecimalField)
SERIALIZED_NUMBERS = (serializers.IntegerField, serializers.FloatField, serializers.DecimalField)


def lacks(field: Any) -> list[str]:
    """The bounds a numeric field does not have: a decimal's digits bound it both ways."""
    if getattr(field, "max_digits", None) is not None:
        return []
    return [bound for bound in ("min_value", "max_value") if getattr(field, bound, None) is None]


def form_gaps(name: str, fields: dict[str, forms.Field]) -> list[str]:
    return [
        f"{name}.{field_name} has no {' nor '.join(missing)}"
        for field_name, field in fields.items()
        if isinstance(field, NUMBERS) and (missing := lacks(field))
    ]


def serializer_gaps(serializer_class: type[serializers.BaseSerializer]) -> list[str]:
    """Each number field without its bounds. Exempt: a float only shown (read-only), and the fields a
    ModelSerializer builds read-only from its model (ids, counters): DRF builds those without bounds whatever the
    model says, and they take no value."""
    declared = getattr(serializer_class, "_declared_fields", {})
    gaps = []
    for name, field in serializer_class().fields.items():
        path = f"{serializer_class.__qualname__}.{name}"
        exempt = field.read_only and name not in declared
        while isinstance(field, (serializers.ListField, serializers.DictField)):
            path, field = f"{path}[]", field.child
        if isinstance(field, serializers.FloatField) and field.read_only:
            exempt = True
        if isinstance(field, SERIALIZED_NUMBERS) and not exempt and (missing := lacks(field)):
            gaps.append(f"{path} has no {' nor '.join(missing)}")
    return gaps


def defines_init(form_class: type) -> bool:
    """Whether the form (or a form of the apps it extends) makes or changes fields in __init__."""
    return any("__init__" in vars(k) for k in form_class.__mro__ if k.__module__.split(".")[0] in APP_NAMES)


APP_NAMES = {m.__name__.split(".")[0] for m in app_modules()}


@pytest.fixture
def built(db, member, team) -> dict[type, Callable[[], forms.BaseForm]]:
    """The forms that make fields from what they are given, made as their views make them."""
    image = RuntimeImageFactory(name="busybox")
    template = JobTemplate.objects.create(team=team, name="t", image=image, command="echo {x}", created_by=member)
    return {
        JobForm: lambda: JobForm(user=member),
        ArrayForm: lambda: ArrayForm(user=member),
        TemplateRunForm: lambda: TemplateRunForm(template=template, user=member),
        ScheduleForm: lambda: ScheduleForm(user=member),
        WebhookForm: lambda: WebhookForm(user=member),
        NodeActionForm: lambda: NodeActionForm(action="drain"),
        NodeFeaturesForm: lambda: NodeFeaturesForm(),
    }


def test_every_number_field_of_every_form_has_its_bounds(built):
    gaps, unbuilt = [], []
    for form_class in classes(forms.BaseForm):
        name = f"{form_class.__module__}.{form_class.__qualname__}"
        gaps += form_gaps(name, form_class.base_fields)
        if form_class in built:
            gaps += form_gaps(f"{name} (as made)", built[form_class]().fields)
        elif defines_init(form_class):
            unbuilt.append(name)

    assert not gaps, "\n".join(gaps)
    assert not unbuilt, f"Say in `built` how these forms are made, so the fields they make are checked: {unbuilt}"


def test_every_number_field_of_every_serializer_has_its_bounds():
    gaps = [gap for found in classes(serializers.BaseSerializer) for gap in serializer_gaps(found)]

    assert not gaps, "\n".join(gaps)


def test_every_number_filter_has_its_bounds():
    gaps = []
    for filterset in classes(django_filters.FilterSet):
        for name, found in filterset.base_filters.items():
            if issubclass(found.field_class, NUMBERS) and (missing := lacks(found.field)):
                gaps.append(f"{filterset.__qualname__}.{name} has no {' nor '.join(missing)}")

    assert not gaps, "\n".join(gaps)


@pytest.mark.parametrize("pagination", classes(BasePagination), ids=lambda c: c.__qualname__)
def test_every_page_number_has_its_bounds(pagination):
    parameters = pagination().get_schema_operation_parameters(view=None)
    numbers = [p for p in parameters if p["schema"].get("type") == "integer"]

    assert numbers
    for parameter in numbers:
        assert parameter["schema"]["minimum"] == 1 and parameter["schema"]["maximum"] >= 1, parameter


def test_a_capped_list_documents_no_page_past_its_count(db):
    document = Client().get("/api/schema/?format=json").json()
    page = next(p for p in document["paths"]["/api/v1/jobs/"]["get"]["parameters"] if p["name"] == "page")

    assert page["schema"]["minimum"] == 1 and page["schema"]["maximum"] == 200  # 10,000 counted, 50 a page


# --- the OpenAPI document ----------------------------------------------------------------------------------


def integers(document: dict, schema: dict, at: str) -> Iterator[tuple[str, dict]]:
    """Every integer a schema names, with where it is, through references, combinations, items and properties."""
    if "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    for combined in ("oneOf", "anyOf", "allOf"):
        for option in schema.get(combined, []):
            yield from integers(document, option, at)
    if schema.get("type") == "integer" and not schema.get("readOnly"):
        yield at, schema
    if isinstance(items := schema.get("items"), dict):
        yield from integers(document, items, f"{at}[]")
    if isinstance(values := schema.get("additionalProperties"), dict):
        yield from integers(document, values, f"{at}{{}}")
    for name, property_schema in schema.get("properties", {}).items():
        yield from integers(document, property_schema, f"{at}.{name}")


def test_the_document_bounds_every_integer_a_request_sends(db):
    document = Client().get("/api/schema/?format=json").json()
    gaps, seen = [], 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            # Path ids are not among them: an id no object has is 404, whatever its size.
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query":
                    for at, schema in integers(document, parameter["schema"], f"{where} ?{parameter['name']}"):
                        seen += 1
                        gaps += [] if {"minimum", "maximum"} <= set(schema) else [at]
            for media in operation.get("requestBody", {}).get("content", {}).values():
                for at, schema in integers(document, media["schema"], f"{where} body"):
                    seen += 1
                    gaps += [] if {"minimum", "maximum"} <= set(schema) else [at]

    assert seen > 20
    assert not gaps, "\n".join(sorted(set(gaps)))
