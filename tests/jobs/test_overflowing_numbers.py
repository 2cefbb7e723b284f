"""Integers past what their column keeps, or past the setting that bounds them lower, sent to the submission API,
the arrays API, the form's page and the log's offsets: each is a 400 naming the field, in the words Django and DRF
use, never a 500; and a value any size, drawn by hypothesis, is refused by exactly the bounds the OpenAPI document
shows."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rest_framework.test import APIClient

from jobs.models import Job, JobArray
from tests.factories import submit_job
from tests.jobs.test_hostile_fields import PROPERTY, assert_no_500

JOBS, ARRAYS = "/api/v1/jobs/", "/api/v1/arrays/"
INT_MAX = 2_147_483_647  # a PositiveIntegerField column's most
SMALL_MAX = 32_767  # a PositiveSmallIntegerField column's most
BIGINT_MAX = 9_223_372_036_854_775_807


def declared(**changes) -> dict:
    return {"name": "n", "image": "busybox", "command": "true", "cpus": 1, "memory_mb": 64, "time_limit_s": 60,
            **changes}  # fmt: skip


def at_most(limit: int) -> list[str]:
    return [f"Ensure this value is less than or equal to {limit}."]


def post_json(api: APIClient, url: str, body: dict):
    return api.post(url, json.dumps(body), content_type="application/json")


@pytest.fixture
def no_500(api):
    """The client answers a server error as its 500 instead of raising it in the test."""
    api.raise_request_exception = False
    return api


@pytest.mark.parametrize("value", [2**63, 10**30, INT_MAX + 1])
@pytest.mark.parametrize("field", ["max_running", "stop_after_failures"])
def test_an_arrays_count_past_its_column_is_a_400_naming_it(no_500, image, local_node, field, value):
    by_json = post_json(no_500, ARRAYS, declared(indices="0-1", **{field: value}))
    by_form = no_500.post(ARRAYS, declared(indices="0-1", **{field: str(value)}), format="multipart")

    assert (by_json.status_code, by_json.json()) == (400, {field: at_most(INT_MAX)})
    assert (by_form.status_code, by_form.json()) == (400, {field: at_most(INT_MAX)})
    assert not JobArray.objects.exists() and not Job.objects.exists()


@pytest.mark.parametrize("field", ["max_running", "stop_after_failures"])
def test_an_arrays_count_at_its_columns_most_is_taken(api, image, local_node, field):
    response = post_json(api, ARRAYS, declared(indices="0-1", **{field: INT_MAX}))

    assert response.status_code == 201, response.json()
    assert response.json()[field] == INT_MAX


@pytest.mark.parametrize(
    ("field", "value", "most"),
    [("max_retries", 2**63, 5), ("retry_delay_s", 2**63, 86_400), ("time_limit_s", 2**63, 604_800)],
)
def test_a_number_past_its_setting_is_a_400_naming_the_settings_bound(no_500, image, local_node, field, value, most):
    response = post_json(no_500, JOBS, declared(**{field: value}))

    assert (response.status_code, response.json()) == (400, {field: at_most(most)})


@pytest.mark.parametrize(
    ("field", "setting", "value", "column"),
    [("max_retries", "E31_MAX_RETRIES", SMALL_MAX + 1, SMALL_MAX), ("retry_delay_s", "E31_RETRY_DELAY_MAX_S",
     INT_MAX + 1, INT_MAX), ("time_limit_s", "E31_TIME_LIMIT_MAX_S", INT_MAX + 1, INT_MAX)],
)  # fmt: skip
def test_a_setting_past_the_column_does_not_lift_its_bound(no_500, settings, image, local_node, field, setting, value,
                                                           column):  # fmt: skip
    setattr(settings, setting, 10**12)

    response = post_json(no_500, JOBS, declared(**{field: value}))
    document = no_500.get("/api/schema/?format=json").json()

    assert (response.status_code, response.json()) == (400, {field: at_most(column)})
    assert document["components"]["schemas"]["JobSubmission"]["properties"][field]["maximum"] == column


def test_an_arrays_count_past_its_column_on_the_form_is_a_400_at_its_field(client, member, image, local_node):
    client.force_login(member)

    response = client.post("/jobs/new/", declared(indices="0-1", max_running=str(2**63)))

    page = response.content.decode()
    assert response.status_code == 400
    assert 'class="field field-max_running invalid"' in page and at_most(INT_MAX)[0] in page
    assert not JobArray.objects.exists()


def test_a_log_offset_past_a_bigint_is_a_400_naming_it(api, client, member, team, local_node):
    job = submit_job(member, team)
    client.force_login(member)

    by_api = api.get(f"{JOBS}{job.pk}/logs/", {"offset": 2**63})
    by_page = client.get(f"/jobs/{job.pk}/log/lines/", {"offset": 2**63, "line": 0})

    assert (by_api.status_code, by_api.json()) == (400, {"offset": at_most(BIGINT_MAX)})
    assert by_page.status_code == 400
    assert by_page.content.decode() == (
        f"offset: {at_most(BIGINT_MAX)[0]}; line: Ensure this value is greater than or equal to 1."
    )


# --- any integer, against the bounds the document shows ------------------------------------------------------

ARRAY_NUMBERS = ["max_running", "stop_after_failures", "max_retries", "retry_delay_s", "time_limit_s", "gpus"]


def documented(api: APIClient) -> dict[str, tuple[int, int]]:
    """The bounds the OpenAPI document gives each integer of an array's submission."""
    schemas = api.get("/api/schema/?format=json").json()["components"]["schemas"]
    properties = {**schemas["JobSubmission"]["properties"], **schemas["ArraySubmission"]["allOf"][1]["properties"]}
    return {name: (properties[name]["minimum"], properties[name]["maximum"]) for name in ARRAY_NUMBERS}


@PROPERTY
@given(
    field=st.sampled_from(ARRAY_NUMBERS),
    value=st.integers() | st.integers(min_value=2**31 - 2, max_value=2**31 + 2) | st.integers(min_value=2**63 - 2),
)
def test_any_integer_is_taken_or_refused_by_the_bounds_the_document_shows(no_500, image, local_node, field, value):
    least, most = documented(no_500)[field]

    response = post_json(no_500, ARRAYS, declared(indices="0", **{field: value}))

    assert_no_500(response)
    if not least <= value <= most:
        assert response.status_code == 400 and field in response.json(), (value, response.json())
    elif field != "gpus":  # a number of gpus within the bounds may still be more than the pool has
        assert response.status_code == 201, (value, response.json())
