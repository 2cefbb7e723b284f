"""`e31` for a night of many jobs: arrays (`--array 0-99%8`, `e31 array`, `e31 wait` of an array), dependencies
(`--after`), inputs (`--input`) and retry rules, against a stand-in server that records what it was sent."""

import pytest

from e31cli.exits import Exit
from tests.e31cli.conftest import Server, e31_process

JOB_ID = "5b0e6f3c-8d1a-4c55-9a8e-0d6f4c1e2a77"
ARRAY_ID = "0c4d2b9e-3f1a-4e7b-8a6d-2e5f7c9b1a30"
OTHER_ID = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"
SUBMIT = ["submit", "--image", "busybox"]


def an_array(stage: str = "release", **counts: int) -> dict:
    return {"id": ARRAY_ID, "size": sum(counts.values()), "max_running": 2, "stage": stage, "counts": counts}


def a_job(**fields) -> dict:
    return {
        "id": JOB_ID, "name": "n", "team": "red", "image": "busybox", "command": ["true"],
        "request": {"cpus": 1, "memory_mb": 64, "gpus": 0, "time_limit_s": 60}, "stage": "release",
        "outcome": "succeeded", "exit_code": 0, "reason": "", "submitted_at": "2026-12-04T10:00:00Z",
        "held_at": None, "started_at": None, "finished_at": None, "released_at": None, "hold": None,
        "record": None, "queue": "batch", "standing": None, "array": None, "array_index": None, "attempts": [],
        **fields,
    }  # fmt: skip


# --- submit ---------------------------------------------------------------------------------------------------


def test_an_array_is_posted_to_the_arrays_endpoint_with_its_indices_and_how_many_run_at_once(e31):
    server = Server({"/api/v1/arrays/": (201, an_array("submit", submit=100))})
    result = e31(server, *SUBMIT, "--array", "0-99%8", "--stop-after-failures", "5", "--", "sh", "-c", "echo $X")

    assert result.exit_code == 0, result.output
    assert result.stdout == f"{ARRAY_ID}\n"
    assert server.paths() == ["POST /api/v1/arrays/"]
    form = server.form()
    assert form["indices"] == ["0-99"] and form["max_running"] == ["8"] and form["stop_after_failures"] == ["5"]
    assert form["image"] == ["busybox"] and form["command"] == ['["sh", "-c", "echo $X"]']


def test_an_array_without_a_limit_sends_no_max_running(e31):
    server = Server({"/api/v1/arrays/": (201, an_array("submit", submit=5))})
    result = e31(server, *SUBMIT, "--array", "1,3,5-7", "--json", "--", "true")

    assert result.exit_code == 0, result.output
    assert '"size": 5' in result.stdout
    form = server.form()
    assert form["indices"] == ["1,3,5-7"] and "max_running" not in form and "stop_after_failures" not in form


def test_an_array_with_data_files_sends_them_with_its_fields_in_one_multipart_body(e31, tmp_path):
    data = tmp_path / "train.csv"
    data.write_text("a,b\n")
    server = Server({"/api/v1/arrays/": (201, an_array("submit", submit=21))})
    result = e31(server, *SUBMIT, "--array", "0-20:5%2", "--data", str(data), "--", "true")

    assert result.exit_code == 0, result.output
    body = server.requests[0].content
    assert b'name="indices"\r\n\r\n0-20:5\r\n' in body and b'name="max_running"\r\n\r\n2\r\n' in body
    assert b'filename="train.csv"' in body


def test_dependencies_and_inputs_are_repeated_form_fields_of_a_job(e31):
    server = Server({"/api/v1/jobs/": (201, a_job(stage="submit"))})
    result = e31(server, *SUBMIT, "--after", "ok:A", "--after", "any:B", "--after", "notok:C", "--after", "OK:D",
                 "--input", f"{OTHER_ID}:model/*.json", "--input", "E:*.csv", "--", "true")  # fmt: skip

    assert result.exit_code == 0, result.output
    assert server.paths() == ["POST /api/v1/jobs/"]
    form = server.form()
    assert form["after_ok"] == ["A", "D"] and form["after_any"] == ["B"] and form["after_not_ok"] == ["C"]
    assert form["inputs_from"] == [f"{OTHER_ID}:model/*.json", "E:*.csv"]
    assert "indices" not in form


def test_retry_rules_are_sent_as_the_api_names_them(e31):
    server = Server({"/api/v1/jobs/": (201, a_job(stage="submit"))})
    result = e31(server, *SUBMIT, "--retry", "3", "--retry-on", "137,out_of_memory", "--retry-on", "timed_out",
                 "--retry-memory-factor", "2", "--retry-delay", "1m30s", "--", "true")  # fmt: skip

    assert result.exit_code == 0, result.output
    form = server.form()
    assert form["max_retries"] == ["3"] and form["retry_on"] == ["137", "out_of_memory", "timed_out"]
    assert form["retry_memory_factor"] == ["2"] and form["retry_delay_s"] == ["1m30s"]


def test_no_retry_rules_leave_the_servers_defaults_and_retries_still_works(e31):
    server = Server({"/api/v1/jobs/": (201, a_job(stage="submit"))})
    result = e31(server, *SUBMIT, "--retries", "2", "--", "true")

    assert result.exit_code == 0, result.output
    form = server.form()
    assert form["max_retries"] == ["2"]
    assert not {"retry_on", "retry_memory_factor", "retry_delay_s", "after_ok", "inputs_from"} & set(form)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--array", "%8"], "--array"),
        (["--array", "0-9%0"], "--array"),
        (["--array", "0-9%x"], "--array"),
        (["--after", "later:A"], "--after"),
        (["--after", "ok:"], "--after"),
        (["--input", "nocolon"], "--input"),
        (["--input", "A:"], "--input"),
        (["--stop-after-failures", "3"], "--stop-after-failures"),
        (["--array", "0-3", "--wait", "--logs"], "--logs"),
    ],
)
def test_a_bad_option_is_a_usage_error_before_anything_is_sent(e31, args, said):
    server = Server({})
    result = e31(server, *SUBMIT, *args, "--", "true")

    assert result.exit_code == Exit.USAGE, result.output
    assert said in result.stderr and server.requests == []


def test_a_memory_factor_below_1_is_refused_by_the_command_line(e31):
    result = e31(Server({}), *SUBMIT, "--retry-memory-factor", "0.5", "--", "true")

    assert result.exit_code == Exit.USAGE


def test_submit_array_wait_follows_the_array_and_exits_by_its_tasks(e31):
    server = Server({
        "/api/v1/arrays/": (201, an_array("submit", submit=4)),
        f"/api/v1/arrays/{ARRAY_ID}/": [an_array("run", run=2, submit=2), an_array(succeeded=3, failed=1)],
    })  # fmt: skip
    result = e31(server, *SUBMIT, "--array", "0-3%2", "--wait", "--", "true")

    assert result.exit_code == Exit.FAILED, result.output
    assert result.stdout == f"{ARRAY_ID}\n"
    assert f"array {ARRAY_ID}: run (2 submit, 2 run)" in result.stderr
    assert f"array {ARRAY_ID}: 3 succeeded, 1 failed" in result.stderr
    assert not any(path.startswith("GET /api/v1/jobs/") for path in server.paths())


# --- wait -----------------------------------------------------------------------------------------------------


def test_wait_on_an_array_id_polls_the_array_to_its_release_and_exits_0_when_every_task_succeeded(e31):
    server = Server({
        f"/api/v1/arrays/{ARRAY_ID}/": [
            an_array("submit", submit=4), an_array("run", run=2, submit=2), an_array("run", run=2, succeeded=2),
            an_array(succeeded=4, failed=0),
        ],
    })  # fmt: skip
    result = e31(server, "wait", ARRAY_ID)

    assert result.exit_code == 0, result.output
    assert server.paths() == [f"GET /api/v1/jobs/{ARRAY_ID}/"] + [f"GET /api/v1/arrays/{ARRAY_ID}/"] * 4
    lines = result.stderr.splitlines()
    assert lines == [
        f"array {ARRAY_ID}: submit (4 submit)", f"array {ARRAY_ID}: run (2 submit, 2 run)",
        f"array {ARRAY_ID}: release (4 succeeded)", f"array {ARRAY_ID}: 4 succeeded",
    ]  # fmt: skip
    assert result.stdout == ""


@pytest.mark.parametrize(
    "counts",
    [{"succeeded": 3, "failed": 1}, {"succeeded": 3, "cancelled": 1}, {"out_of_memory": 4}, {"timed_out": 1}],
)
def test_wait_on_an_array_with_any_task_that_did_not_succeed_exits_as_a_failed_job(e31, counts):
    server = Server({f"/api/v1/arrays/{ARRAY_ID}/": an_array(**counts)})
    result = e31(server, "wait", ARRAY_ID)

    assert result.exit_code == Exit.FAILED, result.output
    assert f"e31 array {ARRAY_ID} --tasks" in result.stderr


def test_wait_on_an_array_as_json_prints_the_array_at_its_release(e31):
    server = Server({f"/api/v1/arrays/{ARRAY_ID}/": an_array(succeeded=2)})
    result = e31(server, "wait", "--json", ARRAY_ID)

    assert result.exit_code == 0 and '"succeeded": 2' in result.stdout


def test_wait_on_a_job_reads_the_job_once_and_never_asks_for_an_array(e31):
    server = Server({f"/api/v1/jobs/{JOB_ID}/": a_job(outcome="failed", exit_code=1)})
    result = e31(server, "wait", JOB_ID)

    assert result.exit_code == Exit.FAILED, result.output
    assert server.paths() == [f"GET /api/v1/jobs/{JOB_ID}/"]


def test_wait_on_an_id_of_neither_is_not_found_naming_both(e31):
    result = e31(Server({}), "wait", OTHER_ID)

    assert result.exit_code == Exit.NOT_FOUND
    assert result.stderr == f"e31: not found: no job or array {OTHER_ID} of your teams\n"


def test_wait_logs_on_an_array_is_a_usage_error(e31):
    result = e31(Server({f"/api/v1/arrays/{ARRAY_ID}/": an_array(succeeded=1)}), "wait", "--logs", ARRAY_ID)

    assert result.exit_code == Exit.USAGE and "each task has its own log" in result.stderr


def test_wait_on_a_job_the_server_will_not_show_stops_there(e31):
    server = Server({f"/api/v1/jobs/{JOB_ID}/": (403, {"detail": "Not allowed."})})
    result = e31(server, "wait", JOB_ID)

    assert result.exit_code == Exit.AUTH and server.paths() == [f"GET /api/v1/jobs/{JOB_ID}/"]


# --- e31 array ------------------------------------------------------------------------------------------------


def test_array_prints_its_size_limit_stage_and_counts_in_order(e31):
    array = an_array("run", failed=1, run=2, succeeded=5, submit=0) | {"name": "sweep [/x]", "stop_after_failures": 3}
    result = e31(Server({f"/api/v1/arrays/{ARRAY_ID}/": array}), "array", ARRAY_ID)

    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()]
    assert rows == [
        ["id", ARRAY_ID], ["name", "sweep", "[/x]"], ["size", "8"], ["max", "running", "2"], ["stage", "run"],
        ["stop", "after", "3", "failed"], ["run", "2"], ["succeeded", "5"], ["failed", "1"],
    ]  # fmt: skip


def test_array_without_a_limit_says_so_and_shows_counts_it_does_not_know_yet(e31):
    array = an_array(succeeded=1) | {"max_running": None, "counts": {"succeeded": 1, "paused": 2}}
    result = e31(Server({f"/api/v1/arrays/{ARRAY_ID}/": array}), "array", ARRAY_ID)

    assert "no limit" in result.stdout and "paused" in result.stdout.splitlines()[-1]


def test_array_json_is_the_servers_answer(e31):
    result = e31(Server({f"/api/v1/arrays/{ARRAY_ID}/": an_array(succeeded=2)}), "array", "--json", ARRAY_ID)

    assert result.exit_code == 0 and '"counts": {\n    "succeeded": 2\n  }' in result.stdout


def test_array_tasks_lists_them_filtered_by_outcome(e31):
    failed = a_job(array=ARRAY_ID, array_index=7, outcome="failed", exit_code=3, reason="exit code 3")
    tasks = {"count": 1, "next": None, "previous": None, "results": [failed]}
    server = Server({f"/api/v1/arrays/{ARRAY_ID}/tasks/": tasks})
    result = e31(server, "array", ARRAY_ID, "--tasks", "--outcome", "failed")

    assert result.exit_code == 0, result.output
    assert server.requests[0].url.params["outcome"] == "failed"
    assert result.stdout.splitlines()[1].split() == ["7", JOB_ID, "release", "failed", "3", "exit", "code", "3"]


def test_an_array_of_another_team_is_not_found(e31):
    result = e31(Server({}), "array", ARRAY_ID)

    assert result.exit_code == Exit.NOT_FOUND


# --- show -----------------------------------------------------------------------------------------------------

ATTEMPTS = [
    {"attempt": 1, "outcome": "out_of_memory", "exit_code": 137, "reason": "killed at 64 MB", "memory_mb": 64,
     "held_at": "2026-12-04T10:00:00Z", "released_at": "2026-12-04T10:01:00Z"},
    {"attempt": 2, "outcome": "succeeded", "exit_code": 0, "reason": "", "memory_mb": 128,
     "held_at": "2026-12-04T10:01:30Z", "released_at": "2026-12-04T10:03:00Z"},
]  # fmt: skip


def test_show_names_a_tasks_array_and_index_and_every_attempt_of_a_retried_job(e31):
    job = a_job(array=ARRAY_ID, array_index=7, attempts=ATTEMPTS)
    result = e31(Server({f"/api/v1/jobs/{JOB_ID}/": job}), "show", JOB_ID)

    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.stdout.splitlines()]
    assert lines[2].split() == ["array", ARRAY_ID, "index", "7"]
    at = next(i for i, line in enumerate(lines) if line.startswith("attempts"))
    assert lines[at].split(None, 1)[1] == (
        "#1 out_of_memory (exit 137), 64 MB, held 2026-12-04T10:00:00Z, released 2026-12-04T10:01:00Z: killed at 64 MB"
    )
    assert lines[at + 1] == "#2 succeeded (exit 0), 128 MB, held 2026-12-04T10:01:30Z, released 2026-12-04T10:03:00Z"


def test_show_of_a_job_tried_once_outside_an_array_has_no_such_rows(e31):
    job = a_job(attempts=ATTEMPTS[1:])
    result = e31(Server({f"/api/v1/jobs/{JOB_ID}/": job}), "show", JOB_ID)

    assert result.exit_code == 0, result.output
    assert "attempts" not in result.stdout and "array" not in result.stdout


def test_show_of_an_attempt_still_running_says_current(e31):
    running = {"attempt": 2, "outcome": None, "exit_code": None, "reason": "", "memory_mb": 128,
               "held_at": "2026-12-04T10:01:30Z", "released_at": None}  # fmt: skip
    job = a_job(stage="run", outcome=None, exit_code=None, attempts=[ATTEMPTS[0], running])
    result = e31(Server({f"/api/v1/jobs/{JOB_ID}/": job}), "show", JOB_ID)

    assert "#2 current, 128 MB, held 2026-12-04T10:01:30Z" in result.stdout


def test_show_names_what_a_held_back_job_waits_for_its_dependencies_inputs_and_retry_rules(e31):
    job = a_job(
        stage="submit", outcome=None, exit_code=None, wait_reason=f"waits for job {OTHER_ID} to succeed",
        after_ok=[OTHER_ID, ARRAY_ID], after_not_ok=[ARRAY_ID], inputs_from=[f"{OTHER_ID}:*.csv"],
        max_retries=2, retry_on=["137", "out_of_memory"], retry_memory_factor=2.0, retry_delay_s=30,
    )  # fmt: skip
    result = e31(Server({f"/api/v1/jobs/{JOB_ID}/": job}), "show", JOB_ID)

    assert result.exit_code == 0, result.output
    lines = [" ".join(line.split()) for line in result.stdout.splitlines()]
    at = lines.index(f"waits waits for job {OTHER_ID} to succeed")
    assert lines[at + 1 :] == [
        f"after ok {OTHER_ID}", ARRAY_ID, f"after not ok {ARRAY_ID}", f"inputs from {OTHER_ID}:*.csv",
        "retries 2 on 137, out_of_memory, memory x2 after out_of_memory, 30 s before the first (doubling)",
    ]  # fmt: skip


def test_wait_says_why_a_held_back_job_is_not_in_the_queue(e31):
    held = a_job(stage="submit", outcome=None, exit_code=None, wait_reason=f"waits for job {OTHER_ID} to succeed")
    server = Server({f"/api/v1/jobs/{JOB_ID}/": [held, a_job()]})
    result = e31(server, "wait", JOB_ID)

    assert result.exit_code == 0, result.output
    assert f"job {JOB_ID}: submit (waits for job {OTHER_ID} to succeed)" in result.stderr


# --- what the real server refuses -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--after", f"ok:{OTHER_ID}"], "after_ok"),
        (["--after", "notok:not-an-id"], "after_not_ok"),
        (["--input", f"{OTHER_ID}:*.csv"], "inputs_from"),
        (["--retry-on", "137,sometimes"], "retry_on"),
        (["--retry-delay", "soon"], "retry_delay_s"),
        (["--array", "9-0%2"], "indices"),
    ],
)
def test_the_server_refuses_what_it_cannot_take_naming_the_field(real_server, args, field):
    url, token = real_server
    result = e31_process(*SUBMIT, *args, "--", "true", url=url, token=token)

    assert result.returncode == Exit.REFUSED, result.stderr
    assert result.stderr.startswith("e31: refused (400): ") and f"{field}: " in result.stderr


def test_wait_and_array_on_an_id_the_server_does_not_know_are_not_found(real_server):
    url, token = real_server

    waited = e31_process("wait", OTHER_ID, url=url, token=token)
    shown = e31_process("array", OTHER_ID, url=url, token=token)

    assert waited.returncode == shown.returncode == Exit.NOT_FOUND
    assert waited.stderr == f"e31: not found: no job or array {OTHER_ID} of your teams\n"
