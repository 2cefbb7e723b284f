"""`e31 submit --time` and `e31 schedule create --time` read a bare number as sbatch does, as minutes, and send
every other form as typed for the server to read (core.when)."""

import json

import pytest

from tests.e31cli.conftest import Server
from tests.e31cli.test_arrays import SUBMIT, a_job
from tests.e31cli.test_schedules import SCHEDULE


@pytest.mark.parametrize(
    ("typed", "sent"), [("90", "90m"), (" 5 ", "5m"), ("1:30:00", "1:30:00"), ("2-12", "2-12"), ("90s", "90s")]
)
def test_submit_sends_a_bare_number_as_minutes_and_the_rest_as_typed(e31, typed, sent):
    server = Server({"/api/v1/jobs/": (201, a_job(stage="submit"))})

    result = e31(server, *SUBMIT, "--time", typed, "--", "true")

    assert result.exit_code == 0, result.output
    assert server.form()["time_limit_s"] == [sent]


def test_a_schedule_s_job_takes_its_time_as_sbatch_does(e31):
    server = Server({"/api/v1/schedules/": (201, SCHEDULE)})

    result = e31(server, "schedule", "create", "--name", "n", "--cron", "@daily", "--image", "busybox",
                 "--time", "45", "--", "true")  # fmt: skip

    assert result.exit_code == 0, result.output
    (request,) = [r for r in server.requests if r.method == "POST"]
    assert json.loads(request.content)["job"]["time_limit_s"] == "45m"
