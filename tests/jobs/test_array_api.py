"""The arrays API (v1) and the chain fields of POST /api/v1/jobs/: as the contract of issue 22 names them."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from accounting.models import Budget, BudgetUnit
from jobs.api import arrays as array_api
from jobs.lifecycle import array_state
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Outcome, Stage, StoredBlob
from tests.factories import member_of, run_to_release, submit_array_of, submit_job
from tests.jobs.conftest import T0

ARRAYS, JOBS = "/api/v1/arrays/", "/api/v1/jobs/"


def declared(**changes) -> dict:
    form = {
        "name": "sweep",
        "image": "busybox",
        "command": "true",
        "cpus": "1",
        "memory_mb": "64",
        "time_limit_s": "60",
    }
    form.update(changes)
    return {k: v for k, v in form.items() if v is not None}


def test_an_array_is_submitted_with_its_indices_and_answers_its_size_and_stage(api, image):
    answer = api.post(ARRAYS, declared(indices="0-20:5", max_running="2"), format="multipart")

    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert {k: body[k] for k in ("size", "max_running", "stage")} == {"size": 5, "max_running": 2, "stage": "submit"}
    tasks = Job.objects.filter(array_id=body["id"]).order_by("array_index")
    assert [t.array_index for t in tasks] == [0, 5, 10, 15, 20]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"indices": "9-1"}, "indices"),
        ({"indices": "a-b"}, "indices"),
        ({"indices": None}, "indices"),
        ({"indices": "0-99999"}, "indices"),
        ({"indices": "0-3", "max_running": "0"}, "max_running"),
        ({"indices": "0-3", "retry_on": "sometimes"}, "retry_on"),
        ({"indices": "0-3", "retry_memory_factor": "0.5"}, "retry_memory_factor"),
    ],
)
def test_bad_array_fields_are_field_errors(api, image, changes, field):
    answer = api.post(ARRAYS, declared(**changes), format="multipart")

    assert answer.status_code == 400 and field in answer.json(), answer.content


def test_an_array_answers_its_counts_and_tasks_in_index_order_filtered_by_outcome(api, member, team, image, local_node):
    array = submit_array_of(member, team, range(3), image=image)
    schedule_pass(now=T0)
    first = Job.objects.get(array=array, array_index=0)
    run_to_release(first, now=T0 + timedelta(seconds=5), outcome=Outcome.FAILED, exit_code=2)

    body = api.get(f"{ARRAYS}{array.pk}/").json()
    tasks = api.get(f"{ARRAYS}{array.pk}/tasks/").json()
    failed = api.get(f"{ARRAYS}{array.pk}/tasks/?outcome=failed").json()

    assert body["counts"][Outcome.FAILED] == 1 and sum(body["counts"].values()) == 3
    assert [t["array_index"] for t in tasks["results"]] == [0, 1, 2]
    assert {t["array"] for t in tasks["results"]} == {str(array.pk)}
    assert [t["array_index"] for t in failed["results"]] == [0]
    assert api.get(f"{ARRAYS}{array.pk}/tasks/?outcome=maybe").status_code == 400


def test_cancel_and_resubmit_failed(api, member, team, image, local_node):
    array = submit_array_of(member, team, range(3), max_running=1, image=image)
    schedule_pass(now=T0)
    run_to_release(Job.objects.get(array=array, array_index=0), now=T0, outcome=Outcome.FAILED, exit_code=1)

    cancelled = api.post(f"{ARRAYS}{array.pk}/cancel/")
    again = api.post(f"{ARRAYS}{array.pk}/resubmit/?only=failed")

    assert cancelled.status_code == 202
    schedule_pass(now=T0)
    assert api.get(f"{ARRAYS}{array.pk}/").json()["stage"] == Stage.RELEASE
    assert again.status_code == 201 and again.json()["size"] == 1
    assert api.post(f"{ARRAYS}{array.pk}/resubmit/?only=sometimes").status_code == 400


def test_an_array_stopped_just_after_its_answer_read_it_answers_the_stop_that_cancelled_its_tasks(
    api, member, team, image, local_node, monkeypatch
):
    array = submit_array_of(member, team, range(3), max_running=1, stop_after_failures=1, image=image)
    schedule_pass(now=T0)
    run_to_release(Job.objects.get(array=array, array_index=0), now=T0, outcome=Outcome.FAILED, exit_code=1)

    def read_then_stopped(arrays, array_id):
        read = array_state.array_in(arrays, array_id)
        # The pass that settles the failure stops the array here: after the answer read it, before it counts its tasks.
        schedule_pass(now=T0)
        return read

    monkeypatch.setattr(array_api, "array_in", read_then_stopped)
    body = api.get(f"{ARRAYS}{array.pk}/").json()

    assert body["counts"] == {Outcome.FAILED: 1, Outcome.CANCELLED: 2}, body
    assert body["stop_reason"] == "1 tasks failed (stop_after_failures=1)" and body["stopped_at"], body
    assert body["stage"] == Stage.RELEASE and body["released_at"], body


def test_another_teams_array_answers_404(outsider_api, member, team, image):
    array = submit_array_of(member, team, range(2), image=image)

    for answer in (
        outsider_api.get(f"{ARRAYS}{array.pk}/"),
        outsider_api.get(f"{ARRAYS}{array.pk}/tasks/"),
        outsider_api.post(f"{ARRAYS}{array.pk}/cancel/"),
        outsider_api.post(f"{ARRAYS}{array.pk}/resubmit/"),
    ):
        assert answer.status_code == 404
    assert Job.objects.filter(array=array, stage=Stage.SUBMIT).count() == 2


def test_a_dependency_on_another_teams_job_or_an_unknown_id_is_a_field_error(api, member, team, image, other_team):
    outsider = submit_job(member_of(other_team, "carol"), other_team, image=image)  # alice is not in blue
    unknown = "00000000-0000-0000-0000-000000000000"

    for field, value in (
        ("after_ok", str(outsider.pk)), ("after_any", unknown), ("after_not_ok", "not-an-id"),
        ("inputs_from", f"{outsider.pk}:*.csv"), ("inputs_from", "no colon"),
    ):  # fmt: skip
        answer = api.post(JOBS, declared(**{field: value}), format="multipart")
        assert answer.status_code == 400 and field in answer.json(), (field, answer.content)


def test_a_job_answers_its_chain_retry_rules_and_attempts(api, member, team, image):
    upstream = submit_job(member, team, image=image)
    answer = api.post(
        JOBS,
        declared(after_ok=str(upstream.pk), inputs_from=f"{upstream.pk}:*.csv", retry_on="137,out_of_memory",
                 retry_memory_factor="2", retry_delay_s="1m", max_retries="2"),
        format="multipart",
    )  # fmt: skip

    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["after_ok"] == [str(upstream.pk)] and body["inputs_from"] == [f"{upstream.pk}:*.csv"]
    assert body["retry_on"] == ["137", "out_of_memory"] and body["retry_memory_factor"] == 2.0
    assert body["retry_delay_s"] == 60 and body["wait_reason"] == f"waits for job {upstream.pk} to succeed"
    assert [a["attempt"] for a in body["attempts"]] == [1]
    shown = api.get(f"{JOBS}{body['id']}/").json()
    assert shown["after_ok"] == body["after_ok"] and shown["inputs_from"] == body["inputs_from"]


def test_a_budget_check_covers_the_whole_arrays_worst_case(api, team, image):
    single = api.post(JOBS + "estimate/", {"cpus": 1, "memory_mb": 64, "time_limit_s": "10h"}, format="json").json()
    limit = (Decimal(single["core_hours"]) * Decimal("3.5")).quantize(Decimal("0.01"))
    Budget.objects.create(team=team, unit=BudgetUnit.CORE_HOURS, monthly=limit)

    refused = api.post(ARRAYS, declared(indices="0-3", time_limit_s="10h"), format="multipart")
    accepted = api.post(ARRAYS, declared(indices="0-2", time_limit_s="10h"), format="multipart")

    assert refused.status_code == 402, refused.content  # four tasks' worst case, though one alone fits
    assert accepted.status_code == 201 and Job.objects.filter(array__isnull=False).count() == 3


def test_a_resubmit_past_the_budget_answers_402_over_budget_and_makes_nothing(api, member, team, image, local_node):
    array = submit_array_of(member, team, range(2), image=image)
    Budget.objects.create(team=team, unit=BudgetUnit.CORE_HOURS, monthly=Decimal("0.01"))

    refused = api.post(f"{ARRAYS}{array.pk}/resubmit/")

    assert refused.status_code == 402, refused.content
    assert refused.json()["code"] == "over_budget" and refused.json()["detail"].startswith("Over budget: team")
    assert Job.objects.filter(array__isnull=False).count() == 2


def test_an_idempotency_key_sent_again_returns_the_array_it_made(api, image):
    headers = {"HTTP_IDEMPOTENCY_KEY": "night-7"}

    first = api.post(ARRAYS, declared(indices="0-3"), format="multipart", **headers)
    again = api.post(ARRAYS, declared(indices="0-3"), format="multipart", **headers)
    other = api.post(ARRAYS, declared(indices="0-4"), format="multipart", **headers)

    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 422)
    assert again.json()["id"] == first.json()["id"]
    assert Job.objects.filter(array__isnull=False).count() == 4


def test_a_data_file_named_from_is_refused_beside_inputs(api, member, team, image):
    upstream = submit_job(member, team, image=image)
    form = declared(inputs_from=f"{upstream.pk}:*")
    form["data"] = SimpleUploadedFile("from", b"x")

    answer = api.post(JOBS, form, format="multipart")

    assert answer.status_code == 400 and "/data/from/" in answer.json()["data"][0]


def test_an_arrays_upload_over_the_limit_is_413_and_leaves_nothing(api, image, settings):
    settings.E31_UPLOAD_FILE_MAX_BYTES = 1000
    form = declared(indices="0-9")
    form["data"] = SimpleUploadedFile("big.bin", b"x" * 1001)

    response = api.post(ARRAYS, form, format="multipart")

    assert response.status_code == 413 and "big.bin" in response.json()["detail"]
    assert not Job.objects.exists() and not StoredBlob.objects.exists()


def test_an_arrays_declared_upload_over_the_limit_is_413_before_the_body_is_read(api, image, settings):
    settings.E31_UPLOAD_JOB_MAX_BYTES = 10 * 1024 * 1024

    response = api.generic(
        "POST", ARRAYS, b"", content_type="multipart/form-data; boundary=xyz", CONTENT_LENGTH=str(20 * 1024**3)
    )

    assert response.status_code == 413 and response.wsgi_request._read_started is False
