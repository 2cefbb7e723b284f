"""`e31 submit --queue --constraint --no-preempt`, and `e31 show` saying a job's queue and where it stands."""

from tests.e31cli.conftest import Server
from tests.e31cli.test_arrays import JOB_ID, SUBMIT, a_job


def test_submit_sends_the_queue_the_constraint_and_the_opt_out(e31):
    server = Server({"/api/v1/jobs/": (201, a_job(stage="submit"))})

    result = e31(server, *SUBMIT, "--queue", "urgent", "--constraint", "bigmem&nvme", "--no-preempt", "--", "true")

    assert result.exit_code == 0, result.output
    form = server.form()
    assert (form["queue"], form["constraint"], form["preemptable"]) == (["urgent"], ["bigmem&nvme"], ["false"])


def test_submit_without_them_leaves_them_to_the_server(e31):
    server = Server({"/api/v1/jobs/": (201, a_job(stage="submit"))})

    result = e31(server, *SUBMIT, "--", "true")

    assert result.exit_code == 0, result.output
    assert not {"queue", "constraint", "preemptable"} & set(server.form())


def test_a_queue_the_server_refuses_is_said_with_its_reason(e31):
    refusal = (400, {"queue": ["There is no queue express: the queues are urgent, batch, scavenger."]})
    server = Server({"/api/v1/jobs/": refusal})

    result = e31(server, *SUBMIT, "--queue", "express", "--", "true")

    assert result.exit_code != 0
    assert "There is no queue express: the queues are urgent, batch, scavenger." in result.output


def test_show_says_the_queue_and_where_a_waiting_job_stands(e31):
    standing = {"position": 2, "queued": 5, "reason": "its team holds 4 cores in queue batch, its limit is 4"}
    job = a_job(stage="submit", outcome="", exit_code=None, constraint="bigmem", preemptable=False, standing=standing)
    server = Server({f"/api/v1/jobs/{JOB_ID}/": job})

    result = e31(server, "show", JOB_ID)

    assert result.exit_code == 0, result.output
    assert "batch, needs bigmem, not preemptable" in result.stdout
    assert "#2 of 5: its team holds 4 cores in queue batch, its limit is 4" in result.stdout
