"""One submission schema: JobForm validates a submission, and both the OpenAPI document (read from
the form) and docs/api.md (checked against it here) say the same fields and limits."""

import re
from pathlib import Path

import pytest
from django import forms
from django.core.validators import MaxValueValidator

from jobs.submit.fields import MAX_VALUES, RepeatedField
from jobs.submit.forms import MAX_PATTERN_CHARS, FlagField, JobForm

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


@pytest.fixture
def form(member, image):
    """The form as a submission meets it (its limits from settings applied)."""
    return JobForm(user=member)


def largest(field) -> int | None:
    """The field's bound: a validator's, or for a part of the request (checked in JobForm.clean after
    the pool, so "can never be held" is said first) its max_value."""
    limits = [v.limit_value for v in field.validators if isinstance(v, MaxValueValidator)]
    return min(limits) if limits else field.max_value


def submission_component(client) -> dict:
    """The submission's schema, with each choice field's enum (a component of its own) put in place."""
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    components = response.json()["components"]["schemas"]
    submission = components["JobSubmission"]
    for name, schema in submission["properties"].items():
        if "allOf" in schema:
            (ref,) = schema.pop("allOf")
            submission["properties"][name] = {**components[ref["$ref"].rsplit("/", 1)[1]], **schema}
    return submission


def documented_fields() -> dict[str, list[str]]:
    """The rows of the table under "## Submitting a job" in docs/api.md: field -> its other cells."""
    section = API_DOC.read_text().split("## Submitting a job", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if match := re.fullmatch(r"\| `(\w+)` \|(.*)\|", line.strip()):
            rows[match[1]] = [cell.strip() for cell in match[2].split("|")]
    return rows


# --- the OpenAPI document -------------------------------------------------------------------------


def test_the_schema_has_the_forms_fields_and_its_required_ones(client, form):
    schema = submission_component(client)

    assert list(schema["properties"]) == list(form.fields)
    assert schema["required"] == [name for name, field in form.fields.items() if field.required]


def test_the_schema_has_the_forms_limits(client, form):
    properties = submission_component(client)["properties"]
    maxima = JobForm.maxima()

    for name, field in form.fields.items():
        schema = properties[name]
        if name in ("data", "outputs"):  # repeated: sent once per value
            assert schema["type"] == "array" and schema["maxItems"] == maxima[name], name
            schema = schema["items"]
        elif isinstance(field, RepeatedField):  # ids, inputs, retry rules: sent once per value too
            assert schema["type"] == "array" and schema["maxItems"] == MAX_VALUES, name
            schema = schema["items"]
        elif "oneOf" in schema:  # a JSON body may send the command as a list, env as an object
            schema = schema["oneOf"][0]
        if isinstance(field, forms.IntegerField):  # Django's FloatField is one too
            assert (schema["type"], schema["minimum"], schema["maximum"]) == (
                "number" if isinstance(field, forms.FloatField) else "integer",
                field.min_value,
                largest(field),
            )
        elif isinstance(field, forms.FileField):
            assert schema == {"type": "string", "format": "binary"}
        elif isinstance(field, FlagField):
            assert schema["type"] == "boolean", name
        elif name == "outputs":  # one pattern of the box's lines
            assert schema == {"type": "string", "maxLength": MAX_PATTERN_CHARS}
        elif fixed := [value for value, _ in getattr(field, "choices", []) if value and name not in ("team", "image")]:
            assert schema["type"] == "string" and schema["enum"] == fixed, name
        else:
            assert schema["type"] == "string" and schema.get("maxLength") == getattr(field, "max_length", None), name
        if not field.required and field.initial is not None:
            assert properties[name]["default"] == field.initial
        assert properties[name].get("description", "") == (field.help_text or "")


def test_the_schema_follows_the_settings(client, db, settings):
    settings.E31_TIME_LIMIT_MAX_S = 3600
    settings.E31_UPLOAD_MAX_FILES = 3

    properties = submission_component(client)["properties"]

    assert properties["time_limit_s"]["maximum"] == 3600 and properties["data"]["maxItems"] == 3


# --- docs/api.md ------------------------------------------------------------------------------------


def test_the_docs_table_lists_exactly_the_forms_fields(form):
    assert list(documented_fields()) == list(form.fields)


def test_the_docs_say_which_fields_are_required(form):
    for name, (_, required, _, _) in documented_fields().items():
        assert required.startswith("yes") == form.fields[name].required, name


def test_the_docs_give_the_forms_limits(form):
    maxima = JobForm.maxima()

    for name, (_, _, limits, _) in documented_fields().items():
        field = form.fields[name]
        if name in maxima:  # a limit from settings: the docs name the setting (or constant) and its value
            assert re.search(rf"\b{maxima[name]}\b", limits), (name, limits)
        if isinstance(field, forms.IntegerField):
            assert limits.startswith(f"{field.min_value} to "), (name, limits)
            if name not in maxima:
                assert limits == f"{field.min_value} to {largest(field)}", (name, limits)
        elif getattr(field, "max_length", None):
            assert limits == f"at most {field.max_length} characters", (name, limits)
    assert str(MAX_PATTERN_CHARS) in documented_fields()["outputs"][2]
