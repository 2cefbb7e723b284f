"""A submission's fields with hostile values: numbers of thousands of digits, negative, non-finite,
unicode, control characters, lone surrogates, overlong text. Each is refused with a 4xx naming the
field and the reason, through the form and the API alike (jobs.submit.forms.JobForm is the one validator);
and no value of any field, as hypothesis draws them, ever gets a 500."""

import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.models import Job

JOBS = "/api/v1/jobs/"
INTEGER_FIELDS = ["cpus", "memory_mb", "gpus", "time_limit_s", "max_retries"]
DIGITS_5000 = "9" * 5000


def declared(**changes) -> dict:
    return {"name": "n", "image": "busybox", "command": "true", "cpus": "1", "memory_mb": "64", "time_limit_s": "60",
            **changes}  # fmt: skip


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


@pytest.fixture
def no_500(api, me):
    """The clients answer a server error as its 500 instead of raising it in the test."""
    api.raise_request_exception = me.raise_request_exception = False
    return api, me


@pytest.mark.parametrize("field", INTEGER_FIELDS)
def test_a_number_of_5000_digits_is_refused_on_the_form_and_the_api(no_500, image, local_node, field):
    api, me = no_500

    by_form = me.post("/jobs/new/", declared(**{field: DIGITS_5000}))
    by_api = api.post(JOBS, declared(**{field: DIGITS_5000}), format="multipart")
    negative = api.post(JOBS, declared(**{field: "-" + DIGITS_5000}), format="multipart")

    assert by_form.status_code == 400 and 'class="field field-' + field + ' invalid"' in by_form.content.decode()
    assert by_api.status_code == 400 and list(by_api.json()) == [field]
    assert negative.status_code == 400 and list(negative.json()) == [field]
    assert not Job.objects.exists()


def test_a_time_limit_of_5000_digits_is_said_to_be_over_the_limit(api, image, local_node, settings):
    settings.E31_TIME_LIMIT_MAX_S = 3600

    response = api.post(JOBS, declared(time_limit_s=DIGITS_5000 + "s"), format="multipart")

    assert response.status_code == 400
    assert response.json() == {"time_limit_s": ["Ensure this value is less than or equal to 3600."]}


@pytest.mark.parametrize("value", [10**4000, -(10**4000), 1e308, 2.5, True, "12abc"])
@pytest.mark.parametrize("field", INTEGER_FIELDS)
def test_a_json_number_of_any_size_is_refused_with_the_field(no_500, image, local_node, field, value):
    api, _ = no_500
    body = {**declared(), field: value}

    response = api.post(JOBS, json.dumps(body), content_type="application/json")

    assert response.status_code == 400 and list(response.json()) == [field]


@pytest.mark.parametrize("time_limit_s", [10**4000, "9" * 900, 604_801])
def test_an_estimate_past_the_longest_time_limit_is_refused(no_500, image, time_limit_s):
    api, me = no_500
    request = {"cpus": 1, "memory_mb": 64, "time_limit_s": time_limit_s}

    by_api = api.post(f"{JOBS}estimate/", json.dumps(request), content_type="application/json")
    on_the_form = me.get("/jobs/estimate/", request)

    assert by_api.status_code == 400 and list(by_api.json()) == ["time_limit_s"]
    assert on_the_form.status_code == 200 and "EUR" not in on_the_form.content.decode()  # no estimate yet


@pytest.mark.parametrize(
    ("name", "said"),
    [("evil\x1b]0;pwned\x07", "U+001B"), ("a\rb", "U+000D"), ("a\nb", "U+000A"), ("report\u202efdp.exe", "U+202E"),
     ("a\u2066b", "U+2066"), ("a\x7fb", "U+007F"), ("a\u2028b", "U+2028")],
)  # fmt: skip
def test_a_job_name_with_a_control_character_or_bidi_control_is_refused_with_the_reason(
    api, me, image, local_node, name, said
):
    by_api = api.post(JOBS, json.dumps(declared(name=name)), content_type="application/json")
    by_form = me.post("/jobs/new/", declared(name=name))

    assert by_api.status_code == 400
    [reason] = by_api.json()["name"]
    assert said in reason and "cannot contain" in reason
    assert by_form.status_code == 400 and said in by_form.content.decode()
    assert not Job.objects.exists()


def test_a_name_in_any_script_with_emoji_and_joiners_is_kept(api, image, local_node):
    name = "Ночной прогон 夜间 🧑‍🔬 مرحبا"

    response = api.post(JOBS, json.dumps(declared(name=name)), content_type="application/json")

    assert response.status_code == 201 and Job.objects.get().name == name


@pytest.mark.parametrize(
    "body",
    ['"name": "n\\ud800"', '"command": ["true", "\\udfff"]', '"env": {"A": "\\ud83d"}', '"outputs": ["\\ud800"]',
     '"team": "\\ud800"'],
)  # fmt: skip
def test_a_lone_surrogate_in_a_json_body_is_400_not_500(no_500, image, local_node, body):
    api, _ = no_500
    text = '{"name": "n", "image": "busybox", "command": "true", "cpus": 1, "memory_mb": 64, "time_limit_s": 60, '

    response = api.post(JOBS, text + body + "}", content_type="application/json")

    assert response.status_code == 400 and "lone surrogate" in response.json()["detail"]
    assert not Job.objects.exists()


@pytest.mark.parametrize(("field", "value"), [("command", '["true", "\\ud800"]'), ("env", '{"A": "\\udc00"}')])
def test_a_lone_surrogate_in_json_text_of_a_form_field_is_refused_with_the_field(me, image, local_node, field, value):
    response = me.post("/jobs/new/", declared(**{field: value}))

    assert response.status_code == 400 and 'class="field field-' + field + ' invalid"' in response.content.decode()
    assert not Job.objects.exists()


def test_an_environment_name_ending_in_a_newline_is_refused(api, image, local_node):
    response = api.post(JOBS, json.dumps(declared(env={"MODE\n": "x"})), content_type="application/json")

    assert response.status_code == 400 and "is not a valid variable name" in response.json()["env"][0]


# --- any value of any field: never a 500 ------------------------------------------------------------

FIELDS = ["team", "name", "image", "command", "env", "cpus", "memory_mb", "gpus", "time_limit_s", "max_retries",
          "isolation", "outputs"]  # fmt: skip
# Every character but the surrogates, which UTF-8 (so a form's body) cannot carry.
TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)
hostile_text = st.one_of(
    TEXT,
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.integers(min_value=1, max_value=6000).map(lambda n: "9" * n),  # past Python's 4,300 digits
    st.integers(min_value=1, max_value=6000).map(lambda n: "-" + "1" * n),
    st.tuples(st.sampled_from(string.digits + "a€🧑\x00\u202e"), st.integers(0, 300_000)).map(lambda t: t[0] * t[1]),
    st.sampled_from(
        [
            "1e309",
            "NaN",
            "-0",
            "0x10",
            "1_000",
            "٣",
            "１２",
            "2h",
            "99999999999999999999d",
            "[]",
            "{}",
            '["sh", "-c"]',
            '{"A": 1}',
            "../../etc",
            "/abs",
            "*",
            DIGITS_5000,
            "-" + DIGITS_5000,
            DIGITS_5000 + "h",
            "a\x1bb",
            "\u202e",
            "a\r\nb",
            '["\\ud800"]',
            '{"A": "\\udfff"}',
        ]
    ),  # fmt: skip
)
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.floats(),
        st.integers(min_value=-(10**4000), max_value=10**4000),
        st.text(st.characters(blacklist_categories=[]), max_size=20),  # lone surrogates too: JSON escapes them
        st.sampled_from(["\ud800", "a\udfffb", "\ud83d", 10**4000, -(10**4000), 1e308]),
        hostile_text,
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
PROPERTY = settings(
    max_examples=120, derandomize=True, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)  # fmt: skip


def assert_no_500(response) -> None:
    assert response.status_code in (200, 201, 302, 400, 413), (response.status_code, response.content[:300])


@PROPERTY
@given(changes=st.dictionaries(st.sampled_from(FIELDS), hostile_text, min_size=1, max_size=3))
def test_no_value_of_the_forms_fields_gets_a_500(no_500, image, local_node, changes):
    _, me = no_500

    assert_no_500(me.post("/jobs/new/", declared(**changes)))


@PROPERTY
@given(changes=st.dictionaries(st.sampled_from(FIELDS), hostile_text, min_size=1, max_size=3))
def test_no_value_of_a_multipart_submission_gets_a_500(no_500, image, local_node, changes):
    api, _ = no_500

    assert_no_500(api.post(JOBS, declared(**changes), format="multipart"))


@PROPERTY
@given(changes=st.dictionaries(st.sampled_from([*FIELDS, "data"]), json_values, min_size=1, max_size=3))
def test_no_value_of_a_json_submission_gets_a_500(no_500, image, local_node, changes):
    api, _ = no_500

    assert_no_500(api.post(JOBS, json.dumps({**declared(), **changes}), content_type="application/json"))


@PROPERTY
@given(
    changes=st.dictionaries(
        st.sampled_from(FIELDS),
        st.text(st.characters(blacklist_categories=[]), max_size=20)
        | st.sampled_from(["\ud800", "a\udfffb", "\ud83d"]),
        min_size=1,
        max_size=3,
    )  # fmt: skip
)
def test_no_text_of_a_json_submission_gets_a_500_lone_surrogates_included(no_500, image, local_node, changes):
    api, _ = no_500

    assert_no_500(api.post(JOBS, json.dumps({**declared(), **changes}), content_type="application/json"))
