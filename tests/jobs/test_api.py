"""The jobs API (v1), endpoint by endpoint: happy path, bad input, outsiders, wrong methods."""

import hashlib
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.pagination import PageNumberPagination
from rest_framework.test import APIClient

from accounting.models import Budget, BudgetUnit
from core.when import AGO_SCHEMA
from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.models import DataFile, Job, Outcome, OutputFile, Stage
from jobs.storage import logs
from jobs.storage.store import data_key
from pool.nodes import Capacity, pool_nodes
from tests.conftest import api_client_for
from tests.factories import (
    ODD_OUTPUT_NAMES,
    RuntimeImageFactory,
    download_name,
    ended_job,
    frozen_monotonic,
    member_of,
    registered_elsewhere,
    store_output,
    submit_job,
    upload,
)
from tests.jobs.conftest import T0

JOBS = "/api/v1/jobs/"
DAY1 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=1)


def job_url(job, suffix: str = "") -> str:
    return f"{JOBS}{job.pk}/{suffix}"


def declared(**changes) -> dict:
    """A valid multipart submission; a change of None leaves the field out."""
    form = {
        "name": "nightly retrain",
        "image": "busybox",
        "command": "python3 /data/train.py --epochs 5",
        "cpus": "1",
        "memory_mb": "64",
        "time_limit_s": "60",
    }
    form.update(changes)
    return {k: v for k, v in form.items() if v is not None}


def post_job(client, key: str = "", **changes):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post(JOBS, declared(**changes), format="multipart", **headers)


def stored_files() -> list[Path]:
    root = Path(settings.STORAGES["default"]["OPTIONS"]["location"])
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


@pytest.fixture
def job(member, team, image):
    return submit_job(member, team, image=image, name="waiting")


# --- POST /api/v1/jobs/ ------------------------------------------------------------------------------------


def test_submit_creates_a_waiting_job_for_my_team(api, member, team, image, local_node):
    response = post_job(api, outputs=["model.json", "reports/"], env=json.dumps({"EPOCHS": "5"}))

    assert response.status_code == 201, response.content
    body = response.json()
    job = Job.objects.get(pk=body["id"])
    assert (job.team, job.submitted_by, job.stage) == (team, member, Stage.SUBMIT)
    assert body["name"] == "nightly retrain" and body["team"] == "red" and body["image"] == "busybox"
    assert body["command"] == ["python3", "/data/train.py", "--epochs", "5"]
    assert body["env"] == {"EPOCHS": "5"} and body["outputs"] == ["model.json", "reports/"]
    assert body["request"] == {"cpus": 1, "memory_mb": 64, "gpus": 0, "time_limit_s": 60}
    assert body["stage"] == "submit" and body["outcome"] == "" and body["submitted_at"]
    assert body["hold"] is None and body["record"] is None


def test_submit_stages_the_data_files_in_the_store(api, image):
    response = post_job(api, data=[upload("train.py", "print('hi')"), upload("train.csv", b"a,b\n1,2\n")])

    assert response.status_code == 201, response.content
    job_id = response.json()["id"]
    files = {f.name: f for f in DataFile.objects.filter(job_id=job_id)}
    assert set(files) == {"train.py", "train.csv"}
    assert files["train.csv"].size == 8 and files["train.csv"].sha256 == hashlib.sha256(b"a,b\n1,2\n").hexdigest()
    with default_storage.open(data_key(job_id, "train.py")) as staged:
        assert staged.read() == b"print('hi')"


def test_the_submission_answer_is_the_job_as_read_back(api, image, local_node, django_assert_max_num_queries):
    names = ["train.py", "B.csv", "a_b", "a-b", "a.csv"]  # a collation other than C would order these otherwise
    files = [upload(name, name) for name in names]
    # the token, teams with their budgets, images, nodes, the team's default queue, the rate, the store
    # quota's check of the data (the team's lock, its data and outputs, its quota), the job, its files, its
    # first event (and the test's savepoint pair); the answer reads nothing back.
    with django_assert_max_num_queries(15):
        response = post_job(api, data=files)

    assert response.status_code == 201, response.content
    answered = response.json()
    read_back = api.get(f"{JOBS}{answered['id']}/").json()
    assert {k: v for k, v in answered.items() if k != "standing"} == {
        k: v for k, v in read_back.items() if k != "standing"
    }
    assert [f["name"] for f in answered["data"]] == sorted(names)  # in code point order, on every database


@pytest.mark.parametrize("budget", [False, True])
def test_a_submission_with_data_locks_its_team_once(api, team, image, local_node, budget):
    if budget:
        Budget.objects.create(team=team, unit=BudgetUnit.MONEY, monthly=Decimal("100.00"))

    with CaptureQueriesContext(connection) as queries:
        response = post_job(api, data=[upload("a.csv", "a,b\n")])

    assert response.status_code == 201, response.content
    assert [q["sql"] for q in queries if "FOR UPDATE" in q["sql"]] == [
        f'SELECT "teams_team"."id" AS "pk" FROM "teams_team" WHERE "teams_team"."id" = {team.pk} '
        'ORDER BY "teams_team"."slug" ASC LIMIT 1 FOR UPDATE'
    ]


def test_submit_accepts_the_command_as_a_json_list(api, image):
    response = post_job(api, command='["sh", "-c", "echo hello > /output/out.txt"]')

    assert response.status_code == 201, response.content
    assert response.json()["command"] == ["sh", "-c", "echo hello > /output/out.txt"]


def test_a_command_sent_once_a_value_an_argument_is_the_argv(api, image):
    argv = ["sh", "-c", "echo a > /output/x"]

    response = post_job(api, command=argv)  # -F command=sh -F command=-c -F command='echo a > /output/x'

    assert response.status_code == 201, response.content
    assert response.json()["command"] == argv
    assert Job.objects.get(pk=response.json()["id"]).command == argv


def test_a_command_sent_as_one_value_is_still_a_line_to_read(api, image):
    response = post_job(api, command=["sh -c 'echo a b'"])

    assert response.status_code == 201, response.content
    assert response.json()["command"] == ["sh", "-c", "echo a b"]


def test_a_time_limit_as_slurm_writes_it_holds_its_seconds(api, image):
    response = post_job(api, time_limit_s="1:30:00")  # e31 submit --time 1:30:00 sends it so

    assert response.status_code == 201, response.content
    assert response.json()["request"]["time_limit_s"] == 5400


def test_submit_accepts_a_json_body(api, image):
    body = {**declared(), "command": ["python3", "-c", "print(1)"], "env": {"SEED": "7"}, "outputs": ["*.json"]}

    response = api.post(JOBS, body, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["command"] == ["python3", "-c", "print(1)"]
    assert response.json()["env"] == {"SEED": "7"} and response.json()["outputs"] == ["*.json"]


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"outputs": 5}, "outputs"),
        ({"outputs": ["model.json", 1]}, "outputs"),
        ({"outputs": {"a": "b"}}, "outputs"),
        ({"name": ["a", "b"]}, "name"),
        ({"cpus": [1]}, "cpus"),
        ({"command": {"run": "x"}}, "command"),
        ({"command": ["python3", 3]}, "command"),
        ({"env": ["A=1"]}, "env"),
        ({"env": {"A": None}}, "env"),
    ],
)
def test_a_json_body_with_a_field_of_the_wrong_shape_is_refused(api, image, changes, field):
    response = api.post(JOBS, {**declared(), **changes}, format="json")

    assert response.status_code == 400, response.content
    assert list(response.json()) == [field]
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    "changes, said",
    [
        ({"name": ["a", "b"]}, {"name": ["Must be a string or a number."]}),
        ({"command": {"run": "x"}}, {"command": ["Must be a string or a JSON list."]}),
        ({"command": []}, {"command": ["The command must be a non-empty list of strings."]}),
        ({"command": ["x" * 9000]}, {"command": ["Ensure this value has at most 8192 characters (it has 9004)."]}),
        ({"env": ["A=1"]}, {"env": ["Must be a string or a JSON object."]}),
        ({"env": {"A": None}}, {"env": ["The value of A must be a string."]}),
        ({"outputs": {"a": "b"}}, {"outputs": ["Output patterns must be a list of strings."]}),
    ],
)
def test_a_json_body_of_the_wrong_shape_is_told_what_the_field_takes(api, image, changes, said):
    response = api.post(JOBS, {**declared(), **changes}, format="json")

    assert response.status_code == 400 and response.json() == said


def test_each_line_of_an_output_pattern_value_is_a_pattern(api, image):
    response = post_job(api, outputs=["a.json\nreports/", "b.csv"])

    assert response.status_code == 201 and response.json()["outputs"] == ["a.json", "reports/", "b.csv"]


def test_a_json_body_that_is_not_an_object_is_refused(api, image):
    response = api.post(JOBS, [declared()], format="json")

    assert response.status_code == 400 and "non_field_errors" in response.json()


def test_submit_with_no_outputs_declared_takes_every_file(api, image):
    response = post_job(api)

    assert response.status_code == 201 and response.json()["outputs"] == []


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"name": None}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x" * 201}, "name"),
        ({"image": "no-such-image"}, "image"),
        ({"image": None}, "image"),
        ({"command": None}, "command"),
        ({"command": '["python3", '}, "command"),
        ({"command": "[1, 2]"}, "command"),
        ({"command": "[]"}, "command"),
        ({"command": 'echo "unclosed'}, "command"),
        ({"env": "[1, 2]"}, "env"),
        ({"env": '"A=1"'}, "env"),
        ({"env": "{not json"}, "env"),
        ({"env": '{"1BAD": "x"}'}, "env"),
        ({"env": '{"A-B": "x"}'}, "env"),
        ({"env": '{"A": 1}'}, "env"),
        ({"cpus": "0"}, "cpus"),
        ({"cpus": "-1"}, "cpus"),
        ({"cpus": "two"}, "cpus"),
        ({"cpus": None}, "cpus"),
        ({"memory_mb": "15"}, "memory_mb"),
        ({"gpus": "-1"}, "gpus"),
        ({"time_limit_s": "0"}, "time_limit_s"),
        ({"time_limit_s": str(7 * 24 * 3600 + 1)}, "time_limit_s"),
        ({"outputs": ["../secrets"]}, "outputs"),
        ({"outputs": ["reports/../../etc"]}, "outputs"),
        ({"outputs": ["/etc/passwd"]}, "outputs"),
    ],
)
def test_submit_refuses_a_bad_field_with_its_error(api, image, changes, field):
    response = post_job(api, **changes)

    assert response.status_code == 400, response.content
    assert list(response.json()) == [field]
    assert Job.objects.count() == 0


def test_the_time_limit_maximum_comes_from_the_settings(api, image, settings):
    settings.E31_TIME_LIMIT_MAX_S = 3600

    assert post_job(api, time_limit_s="3601").status_code == 400
    assert post_job(api, time_limit_s="3600").status_code == 201


def test_a_request_larger_than_any_node_is_refused_with_the_reason(api, image, local_node):
    response = post_job(api, cpus=str(len(local_node.cpu_ids) + 1))

    assert response.status_code == 400
    [message] = response.json()["non_field_errors"]
    assert "can never be held" in message and f"the largest node has {len(local_node.cpu_ids)} cores" in message
    assert Job.objects.count() == 0


@pytest.mark.parametrize("changes", [{"memory_mb": "999999"}, {"gpus": "1"}])
def test_more_memory_or_gpus_than_any_node_has_is_refused(api, image, local_node, changes):
    response = post_job(api, **changes)

    assert response.status_code == 400 and "can never be held" in response.json()["non_field_errors"][0]


def test_a_request_that_fits_the_largest_node_is_accepted(api, image, local_node):
    response = post_job(api, cpus=str(len(local_node.cpu_ids)), memory_mb=str(local_node.memory_mb))

    assert response.status_code == 201, response.content
    body, job = response.json(), Job.objects.get()
    assert body["id"] == str(job.pk)
    assert (body["request"]["cpus"], body["request"]["memory_mb"]) == (len(local_node.cpu_ids), local_node.memory_mb)
    assert (job.cpus, job.memory_mb, job.outcome) == (len(local_node.cpu_ids), local_node.memory_mb, "")


# --- uploads ---------------------------------------------------------------------------------------


def test_a_file_over_the_per_file_limit_is_refused_with_413_and_leaves_nothing(api, image, settings):
    settings.E31_UPLOAD_FILE_MAX_BYTES = 1000

    response = post_job(api, data=[upload("small.csv", b"x" * 10), upload("big.bin", b"x" * 1001)])

    assert response.status_code == 413
    assert "big.bin is over the per-file limit" in response.json()["detail"]
    assert Job.objects.count() == 0 and DataFile.objects.count() == 0
    assert stored_files() == []


def test_files_over_the_per_job_limit_are_refused_with_413_and_leave_nothing(api, image, settings):
    settings.E31_UPLOAD_JOB_MAX_BYTES = 1500

    response = post_job(api, data=[upload("a.bin", b"x" * 1000), upload("b.bin", b"x" * 1000)])

    assert response.status_code == 413
    assert "over the limit" in response.json()["detail"]
    assert Job.objects.count() == 0 and stored_files() == []


def test_files_exactly_at_the_limits_are_accepted(api, image, settings):
    settings.E31_UPLOAD_FILE_MAX_BYTES = 1000
    settings.E31_UPLOAD_JOB_MAX_BYTES = 2000

    response = post_job(api, data=[upload("a.bin", b"x" * 1000), upload("b.bin", b"x" * 1000)])

    assert response.status_code == 201, response.content
    assert [(f["name"], f["size"]) for f in response.json()["data"]] == [("a.bin", 1000), ("b.bin", 1000)]
    assert sorted(DataFile.objects.values_list("size", flat=True)) == [1000, 1000] and len(stored_files()) == 2


def many_files(settings, most: int) -> None:
    """E31_UPLOAD_MAX_FILES as settings.py sets it: Django's parser counts the files too."""
    settings.E31_UPLOAD_MAX_FILES = settings.DATA_UPLOAD_MAX_NUMBER_FILES = most


def test_too_many_data_files_are_a_field_error(api, image, settings):
    many_files(settings, 2)

    response = post_job(api, data=[upload(f"{n}.txt", "x") for n in range(3)])

    assert response.status_code == 400
    assert response.json() == {"data": ["At most 2 data files."]}
    assert Job.objects.count() == 0 and stored_files() == []


def test_too_many_data_files_sent_with_a_browser_session_are_a_field_error_too(client, member, image, settings):
    many_files(settings, 2)
    client.force_login(member)  # the CSRF check of a session reads the body first

    response = client.post(JOBS, {**declared(), "data": [upload(f"{n}.txt", "x") for n in range(3)]})

    assert response.status_code == 400 and response.json() == {"data": ["At most 2 data files."]}


def test_too_many_fields_are_refused_as_json(api, image, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 10

    response = post_job(api, outputs=[f"{n}.json" for n in range(20)])

    assert response.status_code == 400
    assert response.json() == {"non_field_errors": ["At most 10 fields."]}


def test_fields_over_the_size_limit_are_refused_as_json(api, image, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096

    response = post_job(api, env=json.dumps({"BIG": "x" * 5000}))

    assert response.status_code == 400
    assert "over 0.00390625 MB" in response.json()["non_field_errors"][0]
    assert Job.objects.count() == 0


def test_a_declared_upload_over_the_limit_is_413_before_the_body_is_read(api, image, settings):
    settings.E31_UPLOAD_JOB_MAX_BYTES = 10 * 1024 * 1024
    declared_length = 20 * 1024 * 1024 * 1024  # 20 GB announced; the test client has none of it to give

    response = api.generic(
        "POST", JOBS, b"", content_type="multipart/form-data; boundary=xyz", CONTENT_LENGTH=str(declared_length)
    )

    assert response.status_code == 413
    assert response.json() == {
        "detail": "The upload is too large: the upload (20480 MB) is over the job's limit of 10 MB."
    }
    assert response.wsgi_request._read_started is False


def test_an_anonymous_declared_upload_over_the_limit_is_413_too(db, settings):
    settings.E31_UPLOAD_JOB_MAX_BYTES = 0

    response = APIClient().generic(
        "POST", JOBS, b"", content_type="multipart/form-data; boundary=x", CONTENT_LENGTH="10000000"
    )

    assert response.status_code == 413


def test_a_body_within_the_declared_limit_is_read_and_judged_by_its_files(api, image, settings):
    settings.E31_UPLOAD_JOB_MAX_BYTES = 1000  # the margin for fields and framing lets the body through

    response = post_job(api, data=[upload("a.bin", b"x" * 1001)])

    assert response.status_code == 413 and "the job's data is over the limit" in response.json()["detail"]


@pytest.mark.parametrize(
    "sent, staged",
    [("../../etc/passwd", "passwd"), (".bashrc", "bashrc"), ("-rf", "rf"), ("my data (1).csv", "my_data__1_.csv")],
)
def test_data_file_names_are_sanitized(api, image, sent, staged):
    response = post_job(api, data=[upload(sent, "content")])

    assert response.status_code == 201, response.content
    assert [f.name for f in DataFile.objects.filter(job_id=response.json()["id"])] == [staged]
    assert default_storage.exists(data_key(response.json()["id"], staged))


def test_two_files_with_the_same_sanitized_name_are_refused(api, image):
    response = post_job(api, data=[upload("a b.txt", "one"), upload("a_b.txt", "two")])

    assert response.status_code == 400
    assert response.json() == {"data": ["Two files are named a_b.txt."]}
    assert Job.objects.count() == 0 and stored_files() == []


def test_a_data_file_with_no_usable_name_is_refused(api, image):
    response = post_job(api, data=[upload("___", "content")])

    assert response.status_code == 400 and "data" in response.json()


def multipart(fields: dict[str, str], files: list[tuple[str, bytes]]) -> tuple[bytes, str]:
    """A multipart body written by hand: a file's name goes out exactly as given (`..` included)."""
    boundary = "e31boundary"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields.items()
    ]
    for name, content in files:
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="data"; filename="{name}"\r\n'
        parts.append(head.encode() + b"Content-Type: application/octet-stream\r\n\r\n" + content + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


@pytest.mark.parametrize("name", ["..", ".", "data/..", "..\\"])
def test_a_data_file_named_dot_dot_is_refused_not_dropped(api, image, name):
    body, content_type = multipart(declared(), [("train.csv", b"a,b\n"), (name, b"secret")])

    response = api.generic("POST", JOBS, body, content_type=content_type)

    assert response.status_code == 400, response.content
    assert response.json() == {"data": [f"{name!r} is not a usable file name"]}
    assert Job.objects.count() == 0


def test_an_empty_file_field_is_no_file_at_all(api, image):
    body, content_type = multipart(declared(), [("", b"")])  # a file input left empty

    response = api.generic("POST", JOBS, body, content_type=content_type)

    assert response.status_code == 201 and response.json()["data"] == []


# --- Idempotency-Key -------------------------------------------------------------------------------


def test_the_same_idempotency_key_twice_returns_the_same_job(api, image):
    first = post_job(api, key="nightly-2030-01-01")
    second = post_job(api, key="nightly-2030-01-01")

    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["id"] == second.json()["id"]
    assert Job.objects.count() == 1


def test_different_idempotency_keys_make_different_jobs(api, image):
    assert post_job(api, key="a").json()["id"] != post_job(api, key="b").json()["id"]
    assert Job.objects.count() == 2


def test_an_idempotency_key_belongs_to_the_person_who_sent_it(api, teammate, image):
    mine = post_job(api, key="nightly")
    theirs = post_job(api_client_for(teammate), key="nightly")

    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert mine.json()["id"] != theirs.json()["id"]


def test_the_same_idempotency_key_with_another_body_is_422(api, image):
    first = post_job(api, key="nightly", data=[upload("train.csv", "a,b\n1,2\n")])
    changed = post_job(api, key="nightly", data=[upload("train.csv", "a,b\n9,9\n")])
    renamed = post_job(api, key="nightly", name="another", data=[upload("train.csv", "a,b\n1,2\n")])

    assert first.status_code == 201
    assert (changed.status_code, renamed.status_code) == (422, 422)
    assert "different request" in changed.json()["detail"]
    assert Job.objects.count() == 1


def test_the_same_idempotency_key_with_the_same_body_and_files_is_the_same_job(api, image):
    first = post_job(api, key="nightly", data=[upload("a.csv", "1"), upload("b.csv", "2")])
    again = post_job(api, key="nightly", data=[upload("b.csv", "2"), upload("a.csv", "1")])

    assert (first.status_code, again.status_code) == (201, 200) and first.json()["id"] == again.json()["id"]


def test_a_request_racing_with_the_same_key_gets_the_winners_job(api, member, image, monkeypatch):
    winner = post_job(api, key="nightly").json()
    # The race: the second request looked before the first one committed, and saw no job with the key.
    real_filter = Job.objects.filter
    monkeypatch.setattr(
        Job.objects, "filter", lambda *a, **kw: Job.objects.none() if "idempotency_key" in kw else real_filter(*a, **kw)
    )
    racing = post_job(api, key="nightly")
    monkeypatch.undo()

    assert racing.status_code == 200 and racing.json()["id"] == winner["id"]
    assert Job.objects.count() == 1


def test_a_request_racing_with_the_same_key_and_another_body_is_422(api, member, image, monkeypatch):
    post_job(api, key="nightly")
    real_filter = Job.objects.filter
    monkeypatch.setattr(
        Job.objects, "filter", lambda *a, **kw: Job.objects.none() if "idempotency_key" in kw else real_filter(*a, **kw)
    )
    racing = post_job(api, key="nightly", cpus="2")
    monkeypatch.undo()

    assert racing.status_code == 422 and Job.objects.count() == 1


def test_an_idempotency_key_longer_than_255_characters_is_400_not_cut(api, image):
    response = post_job(api, key="k" * 256)

    assert response.status_code == 400
    assert response.json() == {"Idempotency-Key": ["At most 255 characters."]}
    assert Job.objects.count() == 0
    assert post_job(api, key="k" * 255).status_code == 201


def test_a_key_whose_job_i_can_no_longer_see_is_a_conflict(api, member, team, other_team, image):
    from teams.models import Membership

    post_job(api, key="nightly")
    Membership.objects.filter(user=member, team=team).delete()  # no domain function removes a member yet
    member_of(other_team, member.username)

    response = post_job(api, key="nightly")

    assert response.status_code == 409 and "can no longer see" in response.json()["detail"]
    assert Job.objects.count() == 1


# --- team --------------------------------------------------------------------------------------------


def test_team_is_optional_when_i_am_in_one_team(api, team, image):
    assert post_job(api, team=None).json()["team"] == team.slug


def test_team_is_required_when_i_am_in_several(api, member, other_team, image):
    member_of(other_team, member.username)

    response = post_job(api)

    assert response.status_code == 400 and list(response.json()) == ["team"]
    assert post_job(api, team="blue").json()["team"] == "blue"


def test_a_team_i_am_not_in_is_refused(api, other_team, image):
    response = post_job(api, team=other_team.slug)

    assert response.status_code == 400 and list(response.json()) == ["team"]
    assert Job.objects.count() == 0


# --- GET /api/v1/jobs/ -------------------------------------------------------------------------------------


def test_the_list_shows_my_teams_jobs_newest_first(api, member, teammate, outsider, team, other_team, image):
    first = submit_job(member, team, image=image, name="first")
    second = submit_job(teammate, team, image=image, name="second")
    submit_job(outsider, other_team, image=image, name="not mine")

    body = api.get(JOBS).json()

    assert body["count"] == 2
    assert [j["id"] for j in body["results"]] == [str(second.pk), str(first.pk)]


def test_the_list_filters_by_stage_outcome_and_team(api, member, team, other_team, image):
    member_of(other_team, member.username)
    waiting = submit_job(member, team, image=image)
    cancelled = actions.cancel(submit_job(member, team, image=image), now=T0)
    blue = submit_job(member, other_team, image=image)

    def ids(query: str) -> set[str]:
        return {j["id"] for j in api.get(f"{JOBS}?{query}").json()["results"]}

    assert ids("stage=submit") == {str(waiting.pk), str(blue.pk)}
    assert ids("stage=release") == ids("outcome=cancelled") == {str(cancelled.pk)}
    assert ids("team=blue") == {str(blue.pk)}
    assert ids("team=red&stage=submit") == {str(waiting.pk)}


def test_the_list_takes_several_outcomes_at_once(api, member, team, image, local_node):
    names = {}
    for outcome in [Outcome.SUCCEEDED, Outcome.FAILED, Outcome.OUT_OF_MEMORY, Outcome.TIMED_OUT]:
        names[str(ended_job(member, team, outcome=outcome, at=T0, name=f"night {outcome}").pk)] = outcome

    response = api.get(f"{JOBS}?outcome=failed&outcome=timed_out")

    assert response.status_code == 200
    assert sorted(names[j["id"]] for j in response.json()["results"]) == ["failed", "timed_out"]


def test_the_list_shows_nothing_of_a_team_i_am_not_in_even_when_asked(api, outsider, other_team, image):
    submit_job(outsider, other_team, image=image)

    assert api.get(f"{JOBS}?team={other_team.slug}").json()["count"] == 0


def submitted_on(job: Job, when: datetime) -> Job:
    Job.objects.filter(pk=job.pk).update(submitted_at=when)  # submit() stamps the present
    return job


def test_the_list_filters_by_submitter_image_search_and_time(api, member, teammate, team, image):
    python = RuntimeImageFactory(name="python", reference="e31/python:1")
    mine = submitted_on(submit_job(member, team, image=image, name="nightly retrain", command=["train.py"]), DAY1)
    bobs = submitted_on(submit_job(teammate, team, image=python, name="convert", command=["convert", "--fast"]), DAY2)

    def ids(query: str) -> set[str]:
        response = api.get(f"{JOBS}?{query}")
        assert response.status_code == 200, response.content
        return {j["id"] for j in response.json()["results"]}

    assert ids("user=bob") == {str(bobs.pk)} and ids("user=nobody") == set()
    assert ids("image=python") == {str(bobs.pk)} and ids("image=busybox") == {str(mine.pk)}
    assert ids("q=RETRAIN") == ids("q=train.py") == ids("q=nightly+train") == {str(mine.pk)}
    assert ids("q=--fast") == ids("q=convert+--FAST") == {str(bobs.pk)} and ids("q=nightly+convert") == set()
    assert ids("since=2026-03-03") == ids("since=2026-03-02T10:00:00Z") == {str(bobs.pk)}
    assert ids("until=2026-03-03") == ids("until=2026-03-02T09:00:01%2B00:00") == {str(mine.pk)}
    assert ids("since=2026-03-02T09:00:00Z&until=2026-03-02T09:00:00Z") == set()  # until is exclusive
    assert ids("since=100000d") == {str(mine.pk), str(bobs.pk)} and ids("until=100000d") == set()  # back from now
    assert ids("stage=&team=&q=") == {str(mine.pk), str(bobs.pk)}  # an empty value filters nothing


@pytest.mark.parametrize(
    "query, field",
    [
        ("stage=running", "stage"),  # the browser's groups are not the API's stages
        ("stage=SUBMIT", "stage"),
        ("outcome=ok", "outcome"),
        ("outcome=failed&outcome=ok", "outcome"),  # one bad value among several
        ("team=red+team", "team"),
        ("image=busy/box", "image"),
        ("user=" + "x" * 151, "user"),
        ("since=yesterday", "since"),
        ("until=2026-02-30", "until"),
        ("since=2026-03-02T25:00:00", "since"),
        ("q=" + "x" * 201, "q"),
    ],
)
def test_a_bad_filter_value_is_400_naming_the_filter(api, job, query, field):
    response = api.get(f"{JOBS}?{query}")

    assert response.status_code == 400, response.content
    body = response.json()
    assert list(body) == [field] and isinstance(body[field], list) and body[field][0]


def test_a_bad_page_is_404(api, job):
    assert api.get(f"{JOBS}?page=2").status_code == 404
    assert api.get(f"{JOBS}?page=x").status_code == 404


def test_the_list_pages_keep_the_filters(api, member, team, image, monkeypatch):
    monkeypatch.setattr(PageNumberPagination, "page_size", 2)
    waiting = [submit_job(member, team, image=image, name=f"waiting {n}") for n in range(3)]
    actions.cancel(submit_job(member, team, image=image, name="cancelled"), now=T0)

    first = api.get(f"{JOBS}?stage=submit").json()
    second = api.get(first["next"]).json()

    assert first["count"] == second["count"] == 3
    assert "stage=submit" in first["next"] and "page=2" in first["next"]
    assert [j["name"] for j in first["results"]] == ["waiting 2", "waiting 1"]
    assert [j["id"] for j in second["results"]] == [str(waiting[0].pk)] and second["next"] is None
    assert "stage=submit" in second["previous"]


@pytest.mark.parametrize("jobs", [1, 12])
def test_the_list_query_count_does_not_grow_with_the_number_of_jobs(api, job_at, jobs, django_assert_max_num_queries):
    for n in range(jobs):  # released ones first: a pass holds the oldest waiting job
        job_at(Stage.RELEASE if n < jobs // 3 + 1 else Stage.SUBMIT)

    # The holds with their nodes and records in one; data files, dependencies, inputs and resubmissions; the
    # rate card once.
    with django_assert_max_num_queries(9):
        body = api.get(f"{JOBS}?team=red&q=job&since=2020-01-01").json()

    assert body["count"] == jobs
    assert body["results"][-1]["hold"]["cpu_set"] and body["results"][-1]["record"]["outcome"] == "succeeded"


def test_a_released_job_shows_its_last_hold_and_record_and_its_files_by_name(api, job_at):
    job = job_at(Stage.RELEASE, files={"b.csv": b"1\n", "a.csv": b"2\n"})
    hold = job.last_hold

    listed = api.get(f"{JOBS}?team=red").json()["results"][0]
    shown = api.get(f"{JOBS}{job.pk}/").json()

    assert {k: v for k, v in listed.items() if k != "standing"} == {k: v for k, v in shown.items() if k != "standing"}
    assert shown["hold"] == {
        "node": hold.node.name, "cpu_set": hold.cpu_set, "memory_mb": hold.memory_mb, "gpus": hold.gpu_ids,
        "runtime": hold.runtime,
    }  # fmt: skip
    assert shown["record"]["id"] == str(hold.record.id) and shown["record"]["outcome"] == "succeeded"
    assert shown["released_at"].endswith("Z")
    assert [f["name"] for f in shown["data"]] == ["a.csv", "b.csv"]


def test_every_answer_of_a_job_has_the_fields_the_schema_lists_in_its_order(api, client, job_at):
    job = job_at(Stage.RELEASE)
    record = job.last_hold.record
    documented = client.get("/api/schema/?format=json").json()["components"]["schemas"]["Job"]["properties"]

    listed = api.get(f"{JOBS}?team=red").json()["results"][0]
    shown = api.get(f"{JOBS}{job.pk}/").json()

    assert list(listed) == list(shown) == list(documented)
    assert shown["record"] == {
        "id": str(record.id), "sequence": record.sequence, "held_seconds": f"{record.held_seconds:.3f}",
        "cpu_seconds": f"{record.cpu_seconds:.3f}", "cost": f"{record.cost:.6f}", "currency": record.currency,
        "outcome": record.outcome, "hash": record.hash,
    }  # fmt: skip


def test_a_job_cancelled_by_a_person_is_listed_as_its_own_answer_shows_it(api, job_at, member):
    job = actions.cancel(job_at(Stage.SUBMIT, env={"K": "v"}), now=T0, acting_user=member)

    listed = api.get(f"{JOBS}?team=red").json()["results"][0]
    shown = api.get(f"{JOBS}{job.pk}/").json()

    assert listed == {**shown, "standing": None}
    assert listed["cancelled_by"] == member.username and listed["hold"] is None and listed["record"] is None


# --- GET /api/v1/jobs/{id}/ -------------------------------------------------------------------------------


def test_a_job_shows_its_request_steps_hold_and_record(api, job_at):
    job = job_at(Stage.RELEASE, cpus=1, memory_mb=128)
    hold = job.holds.get()

    body = api.get(job_url(job)).json()

    assert body["id"] == str(job.pk) and body["stage"] == "release" and body["outcome"] == "succeeded"
    assert body["exit_code"] == 0
    assert all(body[f] for f in ("submitted_at", "held_at", "started_at", "finished_at", "released_at"))
    assert body["hold"] == {
        "node": hold.node.name,
        "cpu_set": hold.cpu_set,
        "memory_mb": 128,
        "gpus": [],
        "runtime": "",
    }
    assert body["data"] == []
    assert body["record"]["outcome"] == "succeeded" and body["record"]["sequence"] == 1


def test_a_job_lists_its_data_files_with_their_sizes_and_sha256(api, member, team, image):
    job = submit_job(member, team, image=image, files={"train.py": "print(1)\n", "train.csv": "a,b\n"})

    body = api.get(job_url(job)).json()

    assert body["data"] == [
        {"name": "train.csv", "size": 4, "sha256": hashlib.sha256(b"a,b\n").hexdigest()},
        {"name": "train.py", "size": 9, "sha256": hashlib.sha256(b"print(1)\n").hexdigest()},
    ]
    assert api.get(JOBS).json()["results"][0]["data"] == body["data"]


def test_a_teammate_sees_the_job(job, teammate):
    response = api_client_for(teammate).get(job_url(job))

    assert response.status_code == 200
    assert (response.json()["id"], response.json()["name"], response.json()["team"]) == (str(job.pk), "waiting", "red")


def test_a_job_is_shown_whatever_list_filters_the_url_carries(api, job):
    response = api.get(job_url(job) + "?stage=release&team=blue&since=yesterday")

    assert response.status_code == 200 and response.json()["id"] == str(job.pk)


def test_an_unknown_job_is_404(api):
    assert api.get(f"{JOBS}00000000-0000-0000-0000-000000000000/").status_code == 404
    assert api.get(f"{JOBS}{'-' * 36}/").status_code == 404


# --- who may see --------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "logs/", "outputs/", "outputs/model.json"])
def test_an_outsider_gets_404(outsider_api, job, suffix):
    store_output(job, "model.json", b"{}")
    logs.append_line(job.pk, "hello")

    response = outsider_api.get(job_url(job, suffix))

    assert response.status_code == 404
    assert b"hello" not in response.content and response.content != b"{}"


def test_an_outsider_cannot_cancel_a_job(outsider_api, job):
    assert outsider_api.post(job_url(job, "cancel/")).status_code == 404
    job.refresh_from_db()
    assert job.stage == Stage.SUBMIT and not job.cancel_requested


@pytest.mark.parametrize(
    "method, suffix", [("get", ""), ("post", ""), ("get", "{id}/"), ("post", "{id}/cancel/"), ("get", "{id}/logs/")]
)
def test_an_anonymous_caller_is_refused(job, method, suffix):
    response = getattr(APIClient(), method)(JOBS + suffix.format(id=job.pk))

    assert response.status_code in (401, 403)
    assert b"waiting" not in response.content


def test_a_bad_token_is_refused(job):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")

    response = client.get(job_url(job))

    assert response.status_code in (401, 403) and b"waiting" not in response.content


# --- wrong methods ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, suffix",
    [
        ("put", "{id}/"),
        ("patch", "{id}/"),
        ("delete", "{id}/"),
        ("post", "{id}/"),
        ("delete", ""),
        ("get", "{id}/cancel/"),
        ("post", "{id}/logs/"),
        ("post", "{id}/outputs/"),
        ("delete", "{id}/outputs/model.json"),
    ],
)
def test_a_wrong_method_is_405(api, job, method, suffix):
    response = getattr(api, method)(JOBS + suffix.format(id=job.pk))

    assert response.status_code == 405
    assert Job.objects.filter(pk=job.pk, stage=Stage.SUBMIT).exists()


# --- cancel ------------------------------------------------------------------------------------------


def test_cancel_of_a_waiting_job_releases_it_as_cancelled(api, job):
    response = api.post(job_url(job, "cancel/"))

    assert response.status_code == 202
    assert response.json()["stage"] == "release" and response.json()["outcome"] == "cancelled"
    assert response.json()["cancelled_by"] == "alice"


def test_cancel_is_idempotent(api, job):
    first = api.post(job_url(job, "cancel/"))
    second = api.post(job_url(job, "cancel/"))

    assert (first.status_code, second.status_code) == (202, 202)
    assert first.json()["released_at"] == second.json()["released_at"]


def test_cancel_of_a_running_job_asks_its_worker_to_stop_it(api, job_at):
    job = job_at(Stage.RUN)

    response = api.post(job_url(job, "cancel/"))

    assert response.status_code == 202
    assert response.json()["stage"] == "run" and response.json()["cancel_requested"] is True


def test_cancel_of_a_released_job_leaves_it_as_it_was(api, job_at):
    job = job_at(Stage.RELEASE)
    before = api.get(job_url(job)).json()

    response = api.post(job_url(job, "cancel/"))

    assert response.status_code == 202 and response.json() == before
    assert response.json()["outcome"] == Outcome.SUCCEEDED


def test_cancel_of_a_held_job_answers_with_its_hold_and_record_as_the_cancel_left_them(api, job_at):
    job = job_at(Stage.RENT)

    response = api.post(job_url(job, "cancel/"))

    assert response.status_code == 202
    assert response.json() == api.get(job_url(job)).json()
    assert response.json()["record"]["outcome"] == "cancelled" and response.json()["hold"] is not None


# The token, the job with its team, image and canceller, its holds with their nodes and records, its data
# files, dependencies, inputs and resubmissions; a cancel adds its own work (and whether anything waits on the
# job), and the canceller's name read afresh.
@pytest.mark.parametrize("suffix, method, queries", [("", "get", 8), ("cancel/", "post", 16)])
def test_a_job_is_read_once_per_request(api, job, suffix, method, queries, django_assert_num_queries):
    with django_assert_num_queries(queries):
        response = getattr(api, method)(job_url(job, suffix))

    assert response.status_code in (200, 202)


def test_pin_answers_with_the_job_read_once(api, job_at, team, django_assert_num_queries):
    job = job_at(Stage.RELEASE)
    team.pin_days = 10
    team.save()

    with django_assert_num_queries(9):  # the token, the job, the pin's update, its five relations, the rate card
        response = api.post(job_url(job, "pin/"))

    assert response.status_code == 200 and response.json()["pinned_until"] is not None
    assert response.json() == api.get(job_url(job)).json()


# --- logs ---------------------------------------------------------------------------------------------


@pytest.fixture
def logged(job):
    logs.append_line(job.pk, "staging 2 files")  # "[e31] staging 2 files\n": 22 bytes
    logs.append_line(job.pk, "started")
    return job


def full_log() -> bytes:
    return b"[e31] staging 2 files\n[e31] started\n"


def test_logs_return_the_whole_log_and_the_next_offset(api, logged):
    response = api.get(job_url(logged, "logs/"))

    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    assert response.content == full_log()
    assert response["X-Next-Offset"] == str(len(full_log()))


@pytest.mark.parametrize("offset", [0, 6, 22, 25, 36])
def test_logs_from_an_offset_return_the_bytes_from_there(api, logged, offset):
    response = api.get(job_url(logged, f"logs/?offset={offset}"))

    assert response.content == full_log()[offset:]
    assert response["X-Next-Offset"] == str(len(full_log()))


def test_following_the_next_offset_reads_only_new_lines(api, logged):
    first = api.get(job_url(logged, "logs/"))
    logs.append_line(logged.pk, "done")

    second = api.get(job_url(logged, f"logs/?offset={first['X-Next-Offset']}"))

    assert second.content == b"[e31] done\n"


def test_logs_of_a_job_that_has_not_run_are_empty(api, job):
    response = api.get(job_url(job, "logs/"))

    assert response.status_code == 200 and response.content == b"" and response["X-Next-Offset"] == "0"


@pytest.mark.parametrize("offset", ["-1", "abc", "1.5", "", "99999999999999999999999"])
def test_a_bad_log_offset_is_400(api, logged, offset):
    response = api.get(job_url(logged, f"logs/?offset={offset}"))

    assert response.status_code == 400 and "offset" in response.json()


@pytest.mark.parametrize("offset", [2**44, 2**63 - 1])
def test_an_offset_far_past_the_end_of_a_sealed_log_is_an_empty_tail(api, logged, offset):
    logs.seal(logged.pk)

    response = api.get(job_url(logged, f"logs/?offset={offset}"))

    assert response.status_code == 200 and response.content == b"" and response["X-Next-Offset"] == str(offset)


# --- outputs -------------------------------------------------------------------------------------------


def test_outputs_list_each_collected_file_with_its_size_and_sha256(api, job):
    store_output(job, "reports/summary.csv", b"a,b\n")
    store_output(job, "model.json", b"{}")

    response = api.get(job_url(job, "outputs/"))

    assert response.status_code == 200
    assert response.json() == [
        {"path": "model.json", "size": 2, "sha256": hashlib.sha256(b"{}").hexdigest()},
        {"path": "reports/summary.csv", "size": 4, "sha256": hashlib.sha256(b"a,b\n").hexdigest()},
    ]


def test_an_output_downloads_with_its_bytes_and_checksum(api, job):
    content = b'{"loss": 0.01}\n' * 1000
    store_output(job, "reports/model.json", content)

    response = api.get(job_url(job, "outputs/reports/model.json"))

    assert response.status_code == 200
    body = b"".join(response.streaming_content)
    assert body == content
    assert response["X-Checksum-Sha256"] == hashlib.sha256(content).hexdigest()
    assert 'filename="model.json"' in response["Content-Disposition"]


@pytest.mark.parametrize("name", ODD_OUTPUT_NAMES)
def test_every_kept_output_name_downloads_under_its_own_name(api, job, name):
    content = f"content of {name}".encode()
    store_output(job, name, content)

    response = api.get(job_url(job, f"outputs/{quote(name)}"))

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == content
    assert download_name(response) == name.rsplit("/", 1)[-1]
    assert api.get(job_url(job, "outputs/")).json()[0]["path"] == name


def test_outputs_named_alike_but_for_a_backslash_or_its_escape_download_apart(api, job):
    for name in ("a\\b.txt", "a%5Cb.txt", "a%255Cb.txt", "a/b.txt"):
        store_output(job, name, name.encode())

    for name in ("a\\b.txt", "a%5Cb.txt", "a%255Cb.txt", "a/b.txt"):
        assert b"".join(api.get(job_url(job, f"outputs/{quote(name)}")).streaming_content) == name.encode()


def test_an_older_output_named_with_a_newline_still_downloads(api, job):
    store_output(job, "two\nlines.txt", b"kept before such names were refused")

    response = api.get(job_url(job, f"outputs/{quote('two' + chr(10) + 'lines.txt')}"))

    assert response.status_code == 200 and download_name(response) == "two\nlines.txt"


@pytest.mark.parametrize("path", ["missing.json", "../../../etc/passwd", "model.json/"])
def test_an_output_the_job_does_not_have_is_404(api, job, path):
    store_output(job, "model.json", b"{}")

    assert api.get(job_url(job, f"outputs/{path}")).status_code == 404


def test_an_output_gone_from_the_store_is_404(api, job):
    OutputFile.objects.create(job=job, path="lost.bin", size=1, sha256="0" * 64)

    assert api.get(job_url(job, "outputs/lost.bin")).status_code == 404


def test_another_jobs_output_is_not_served_under_my_job(api, job, member, team, image):
    mine_too = submit_job(member, team, image=image)
    store_output(mine_too, "secret.txt", b"other job")

    assert api.get(job_url(job, "outputs/secret.txt")).status_code == 404


# --- schema --------------------------------------------------------------------------------------------


def test_the_schema_is_an_openapi_3_document_naming_the_job_paths(client):
    response = client.get("/api/schema/?format=json")

    assert response.status_code == 200
    schema = json.loads(response.content)
    assert schema["openapi"].startswith("3.")
    assert {
        "/api/v1/jobs/",
        "/api/v1/jobs/{id}/",
        "/api/v1/jobs/{id}/cancel/",
        "/api/v1/jobs/{id}/logs/",
        "/api/v1/jobs/{id}/outputs/",
        "/api/v1/jobs/{id}/outputs/{path}",
    } <= set(schema["paths"])
    assert set(schema["paths"]["/api/v1/jobs/"]) == {"get", "post"}


def test_the_schema_documents_the_job_list_filters(client):
    schema = client.get("/api/schema/?format=json").json()

    parameters = {p["name"]: p for p in schema["paths"]["/api/v1/jobs/"]["get"]["parameters"]}
    assert set(parameters) == {"stage", "outcome", "team", "user", "image", "since", "until", "q", "page"}
    assert all(p["in"] == "query" and not p.get("required") for p in parameters.values())
    assert set(parameters["stage"]["schema"]["enum"]) == set(Stage.values)
    # Repeated for any of several: `?outcome=failed&outcome=timed_out`.
    outcome = parameters["outcome"]
    assert (outcome["style"], outcome["explode"], outcome["schema"]["type"]) == ("form", True, "array")
    assert set(outcome["schema"]["items"]["enum"]) == set(Outcome.values)
    moment = {"type": "string", "anyOf": [{"format": "date"}, {"format": "date-time"}, AGO_SCHEMA]}
    assert parameters["since"]["schema"] == moment  # a date, a date-time, or a duration back from now
    assert "ISO 8601" in parameters["since"]["description"]
    # A job's own URLs take no list filters.
    assert "parameters" not in schema["paths"]["/api/v1/jobs/{id}/outputs/"]["get"] or {
        p["name"] for p in schema["paths"]["/api/v1/jobs/{id}/outputs/"]["get"]["parameters"]
    } == {"id"}


def test_the_schema_describes_a_submission_with_the_forms_fields(client):
    schema = client.get("/api/schema/?format=json").json()

    body = schema["paths"]["/api/v1/jobs/"]["post"]["requestBody"]["content"]
    assert body["multipart/form-data"]["schema"] == body["application/json"]["schema"]
    assert body["multipart/form-data"]["schema"] == {"$ref": "#/components/schemas/JobSubmission"}
    assert "JobSubmit" not in schema["components"]["schemas"]


def test_a_refusal_is_said_from_the_pool_as_it_is_not_as_it_was_read(api, image, local_node, monkeypatch):
    frozen_monotonic(monkeypatch)
    pool_nodes()  # the view this process keeps for a few seconds: only the local node
    registered_elsewhere("big", Capacity(list(range(256)), local_node.memory_mb, []), monkeypatch)

    response = post_job(api, cpus=str(len(local_node.cpu_ids) + 1))

    assert response.status_code == 201, response.content
    job = Job.objects.get()
    assert (response.json()["id"], job.cpus, job.outcome) == (str(job.pk), len(local_node.cpu_ids) + 1, "")


def test_a_request_the_recent_view_of_the_pool_holds_costs_no_query_for_the_nodes(
    api, image, local_node, monkeypatch, django_assert_max_num_queries
):

    frozen_monotonic(monkeypatch)
    pool_nodes()
    with django_assert_max_num_queries(10):  # 11 with the nodes read (see the answer's own test above)
        response = post_job(api)

    assert response.status_code == 201, response.content


def test_a_request_let_through_by_a_view_the_pool_has_shrunk_below_since_is_rejected_by_the_pass(
    api, image, local_node, monkeypatch
):

    frozen_monotonic(monkeypatch)
    big = Capacity(list(range(64)), local_node.memory_mb, [])
    registered_elsewhere("big", big, monkeypatch)
    pool_nodes()  # read with the big node
    registered_elsewhere("big", Capacity([0], local_node.memory_mb, []), monkeypatch)  # its worker came back smaller

    response = post_job(api, cpus="64")
    assert response.status_code == 201, response.content
    schedule_pass()

    job = Job.objects.get(pk=response.json()["id"])
    assert (job.stage, job.outcome) == ("release", "rejected")
    assert job.reason.startswith("can never be held: needs 64 cores")
