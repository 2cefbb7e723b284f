"""`e31 schedule create|list|pause|resume|delete|runs`: against a stand-in server that records what it was sent,
and once against the real server, end to end."""

import json

import pytest

from e31cli.exits import Exit
from schedules.models import Schedule, ScheduleEvent
from tests.e31cli.conftest import Server, e31_process

SCHEDULE = {
    "id": 7, "name": "nightly", "team": "red", "cron": "0 1 * * *", "description": "At 01:00 every day",
    "time_zone": "Europe/Berlin", "paused": False, "next_runs": ["2026-12-05T01:00:00+01:00"], "last_run": None,
}  # fmt: skip


def sent(server: Server) -> dict:
    (request,) = [r for r in server.requests if r.method in ("POST", "PATCH")]
    return json.loads(request.content)


def test_create_of_a_command_sends_the_job_as_json_and_prints_the_id(e31):
    server = Server({"/api/v1/schedules/": (201, SCHEDULE)})

    result = e31(server, "schedule", "create", "--name", "nightly", "--cron", "0 1 * * *", "--image", "busybox",
                 "--cpus", "2", "--memory", "1G", "--time", "2h", "--array", "0-9%2", "--time-zone", "Europe/Berlin",
                 "--concurrency", "forbid", "--starting-deadline", "300", "--", "sh", "-c", "echo $X")  # fmt: skip

    assert result.exit_code == 0, result.output
    assert result.stdout == "7\n"
    assert "At 01:00 every day (Europe/Berlin); next 2026-12-05T01:00:00+01:00" in result.stderr
    assert sent(server) == {
        "name": "nightly", "cron": "0 1 * * *", "concurrency": "forbid", "paused": False,
        "time_zone": "Europe/Berlin", "starting_deadline_s": 300,
        "job": {"name": "nightly", "image": "busybox", "command": ["sh", "-c", "echo $X"], "cpus": 2,
                "memory_mb": 1024, "gpus": 0, "time_limit_s": "2h", "env": {}, "indices": "0-9", "max_running": 2},
    }  # fmt: skip


def test_create_of_a_template_sends_its_id(e31):
    server = Server({"/api/v1/schedules/": (201, SCHEDULE)})

    result = e31(server, "schedule", "create", "--name", "nightly", "--cron", "@nightly", "--template", "3")

    assert result.exit_code == 0, result.output
    assert sent(server)["template"] == 3 and "job" not in sent(server)


@pytest.mark.parametrize(
    "args",
    [
        ["--name", "n", "--cron", "@daily"],  # neither
        ["--name", "n", "--cron", "@daily", "--template", "3", "--", "true"],  # both
        ["--cron", "@daily", "--template", "3"],  # no name
    ],
)
def test_create_refuses_a_usage_error_before_sending_anything(e31, args):
    server = Server({})

    result = e31(server, "schedule", "create", *args)

    assert result.exit_code == Exit.USAGE, result.output
    assert server.requests == []


def test_a_command_without_an_image_runs_in_busybox(e31):
    # The contract's own shape: e31 schedule create --name N --cron "0 1 * * *" -- command…
    server = Server({"/api/v1/schedules/": (201, SCHEDULE)})

    result = e31(server, "schedule", "create", "--name", "n", "--cron", "0 1 * * *", "--", "true")

    assert result.exit_code == 0, result.output
    assert sent(server)["job"]["image"] == "busybox" and sent(server)["job"]["command"] == ["true"]


def test_list_pause_resume_delete_and_runs(e31):
    run = {"planned_at": "2026-12-04T00:00:00Z", "status": "refused", "job": None, "array": None,
           "reason": "Over budget", "outcome": ""}  # fmt: skip
    server = Server({
        "/api/v1/schedules/": {"count": 1, "next": None, "previous": None, "results": [SCHEDULE]},
        "/api/v1/schedules/7/": SCHEDULE,
        "/api/v1/schedules/7/runs/": {"count": 1, "next": None, "previous": None, "results": [run]},
    })  # fmt: skip

    listed = e31(server, "schedule", "list")
    paused = e31(server, "schedule", "pause", "7")
    resumed = e31(server, "schedule", "resume", "7")
    runs = e31(server, "schedule", "runs", "7")
    deleted = e31(server, "schedule", "delete", "7")

    assert "nightly" in listed.stdout and "At 01:00 every day" in listed.stdout
    assert paused.stdout == "schedule 7 (nightly) paused\n"
    assert resumed.stdout.startswith("schedule 7 (nightly) resumed")
    assert "refused" in runs.stdout and "Over budget" in runs.stdout
    assert deleted.stdout == "schedule 7 deleted\n"
    patches = [json.loads(r.content) for r in server.requests if r.method == "PATCH"]
    assert patches == [{"paused": True}, {"paused": False}]
    assert "DELETE /api/v1/schedules/7/" in server.paths()


# --- the real server ---------------------------------------------------------------------------------------------


def test_a_schedule_made_paused_resumed_and_deleted_through_the_real_server(real_server, member):
    url, token = real_server

    made = e31_process("schedule", "create", "--name", "nightly", "--cron", "0 1 * * *", "--image", "busybox",
                       "--", "echo", "hi", url=url, token=token)  # fmt: skip
    schedule_id = made.stdout.strip()
    assert made.returncode == 0, made.stderr
    assert "At 01:00 every day" in made.stderr
    assert e31_process("schedule", "pause", schedule_id, url=url, token=token).returncode == 0
    assert Schedule.objects.get(pk=schedule_id).paused
    assert e31_process("schedule", "resume", schedule_id, url=url, token=token).returncode == 0
    listed = e31_process("schedule", "list", "--json", url=url, token=token)
    assert [s["name"] for s in json.loads(listed.stdout)] == ["nightly"]
    runs = e31_process("schedule", "runs", schedule_id, "--json", url=url, token=token)
    assert runs.returncode == 0 and json.loads(runs.stdout) == []
    bad = e31_process("schedule", "create", "--name", "x", "--cron", "0 1 * *", "--image", "busybox", "--", "true",
                      url=url, token=token)  # fmt: skip
    assert bad.returncode == Exit.REFUSED and "five fields" in bad.stderr
    assert e31_process("schedule", "delete", schedule_id, url=url, token=token).returncode == 0
    assert not Schedule.objects.exists()
    actions = list(ScheduleEvent.objects.order_by("at", "pk").values_list("action", flat=True))
    assert actions == ["created", "paused", "resumed", "deleted"]
    assert e31_process("schedule", "pause", schedule_id, url=url, token=token).returncode == Exit.NOT_FOUND
