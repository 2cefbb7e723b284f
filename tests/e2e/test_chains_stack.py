"""Dependencies between jobs through the real stack: HTTP, PostgreSQL, a Celery worker process, real containers."""

import pytest

from accounting.models import Record
from jobs.models import Job, Outcome
from pool.models import Hold
from tests.conftest import wait_for_release

pytestmark = [pytest.mark.docker, pytest.mark.celery]


def submit(api, name: str, command: str, **fields) -> dict:
    response = api.post(
        "/api/v1/jobs/",
        {"name": name, "image": "busybox", "command": command, "cpus": "1", "memory_mb": "64", "time_limit_s": "60",
         **fields},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    return response.json()


def released(job_id: str) -> Job:
    return wait_for_release(Job.objects.get(pk=job_id), 90)


def never_held(job: Job) -> bool:
    return not Hold.objects.filter(job=job).exists() and not Record.objects.filter(job=job).exists()


def test_a_failed_job_cancels_the_chain_after_it_naming_each_dependency(stack, api):
    a = submit(api, "prepare", "false")
    b = submit(api, "train", "true", after_ok=a["id"])
    c = submit(api, "evaluate", "true", after_ok=b["id"])
    assert (b["stage"], b["after_ok"], b["wait_reason"]) == ("submit", [a["id"]], f"waits for job {a['id']} to succeed")
    assert c["wait_reason"] == f"waits for job {b['id']} to succeed"

    a_job = released(a["id"])
    assert (a_job.outcome, a_job.exit_code) == (Outcome.FAILED, 1), a_job.reason
    b_job, c_job = released(b["id"]), released(c["id"])
    assert b_job.outcome == c_job.outcome == Outcome.CANCELLED
    assert b_job.reason == f"its dependency can never be met: job {a['id']} ended failed (after_ok)"
    assert c_job.reason == f"its dependency can never be met: job {b['id']} ended cancelled (after_ok)"
    assert never_held(b_job) and never_held(c_job)
    for job in (b_job, c_job):
        body = api.get(f"/api/v1/jobs/{job.pk}/").json()
        assert (body["stage"], body["outcome"], body["reason"]) == ("release", "cancelled", job.reason)
        assert body["wait_reason"] == "" and body["record"] is None


def test_after_not_ok_runs_only_when_its_dependency_did_not_succeed(stack, api):
    fails = submit(api, "fails", "false")
    succeeds = submit(api, "succeeds", "true")
    on_failure = submit(api, "on failure", "echo cleaning up", after_not_ok=fails["id"])
    on_success = submit(api, "not on success", "echo cleaning up", after_not_ok=succeeds["id"])
    either = submit(api, "either way", "true", after_any=fails["id"])
    assert on_failure["wait_reason"] == f"waits for job {fails['id']} to end without succeeding"

    assert released(fails["id"]).outcome == Outcome.FAILED
    assert released(succeeds["id"]).outcome == Outcome.SUCCEEDED

    ran = released(on_failure["id"])
    assert (ran.outcome, ran.exit_code) == (Outcome.SUCCEEDED, 0), ran.reason
    assert ran.held_at > Job.objects.get(pk=fails["id"]).released_at
    assert Record.objects.filter(job=ran).count() == 1
    assert released(either["id"]).outcome == Outcome.SUCCEEDED

    skipped = released(on_success["id"])
    assert skipped.outcome == Outcome.CANCELLED
    assert skipped.reason == (f"its dependency can never be met: job {succeeds['id']} succeeded (after_not_ok)")
    assert never_held(skipped)


def test_an_array_waits_for_its_upstream_and_a_failed_task_cancels_its_downstream_at_once(stack, api):
    prepare = submit(api, "prepare", "sleep 1")
    response = api.post(
        "/api/v1/arrays/",
        {"name": "sweep", "image": "busybox", "command": "sh -c 'test $E31_ARRAY_INDEX -ne 2'", "cpus": "1",
         "memory_mb": "64", "time_limit_s": "60", "indices": "0-3", "max_running": "1", "after_ok": prepare["id"]},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    array_id = response.json()["id"]
    evaluate = submit(api, "evaluate", "true", after_ok=array_id)
    assert evaluate["wait_reason"] == f"waits for array {array_id} to succeed"

    prepared = released(prepare["id"])
    assert prepared.outcome == Outcome.SUCCEEDED, prepared.reason
    tasks = [
        released(str(pk))
        for pk in Job.objects.filter(array_id=array_id).order_by("array_index").values_list("pk", flat=True)
    ]
    assert [t.outcome for t in tasks] == [Outcome.SUCCEEDED, Outcome.SUCCEEDED, Outcome.FAILED, Outcome.SUCCEEDED]
    holds = sorted(Hold.objects.filter(job__in=tasks), key=lambda h: h.held_at)
    assert [h.job.array_index for h in holds] == [0, 1, 2, 3], "one at a time, in index order"
    assert holds[0].held_at >= prepared.released_at, "no task before its upstream succeeded"
    assert all(a.released_at <= b.held_at for a, b in zip(holds, holds[1:], strict=False)), "max_running=1"

    # Doomed by the failed task itself, not by the end of the array.
    evaluated = released(evaluate["id"])
    assert evaluated.outcome == Outcome.CANCELLED and never_held(evaluated)
    assert evaluated.reason == (
        f"its dependency can never be met: array {array_id} has a task that did not succeed (after_ok)"
    )
    assert evaluated.released_at < tasks[3].released_at
    assert api.get(f"/api/v1/arrays/{array_id}/").json()["counts"] == {Outcome.SUCCEEDED: 3, Outcome.FAILED: 1}


def test_a_job_reads_the_matching_outputs_of_its_upstream_read_only_under_data_from(stack, api):
    a = submit(
        api, "prepare", "sh -c 'echo weights > /output/model.txt; echo n > /output/notes.txt; echo x > /output/raw.csv'"
    )
    here = f"/data/from/{a['id']}"
    writable = f"if touch {here}/new 2>/dev/null; then echo writable; else echo read-only; fi"
    b = submit(api, "train", f"sh -ec 'ls {here}; cat {here}/model.txt; {writable}'", inputs_from=f"{a['id']}:*.txt")
    assert (b["inputs_from"], b["wait_reason"]) == ([f"{a['id']}:*.txt"], f"waits for job {a['id']} to succeed")

    prepared = released(a["id"])
    assert prepared.outcome == Outcome.SUCCEEDED, prepared.reason
    trained = released(b["id"])
    assert (trained.outcome, trained.exit_code) == (Outcome.SUCCEEDED, 0), trained.reason
    assert trained.held_at >= prepared.released_at
    assert api.get(f"/api/v1/jobs/{b['id']}/logs/").content == b"model.txt\nnotes.txt\nweights\nread-only\n"
