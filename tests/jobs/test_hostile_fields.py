"""A submission's fields with hostile values: numbers of thousands of digits, negative, non-finite,
unicode, control characters, lone surrogates, overlong text. Each is refused with a 4xx naming the
field and the reason, through the form and the API alike (jobs.forms.JobForm is the one validator);
and no value of any field, as hypothesis draws them, ever gets a 500."""

import json

import pytest

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
