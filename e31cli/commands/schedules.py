"""`e31 schedule`: schedules of a template or a command, listed, paused, resumed, deleted, and their runs."""

from typing import Annotated, Any

import typer

from e31cli import session, units
from e31cli.commands.jobs import array_fields, env_pairs
from e31cli.exits import CliError, Exit
from e31cli.session import AsJson, err, out, parsed, print_json, print_rows, say

ScheduleId = Annotated[int, typer.Argument(metavar="ID")]


def schedule_create(
    command: Annotated[
        list[str] | None, typer.Argument(help="The command each run submits, after `--`.", show_default=False)
    ] = None,
    name: Annotated[str, typer.Option("--name", "-n", help="The schedule's name (and its jobs').")] = "",
    cron: Annotated[
        str,
        typer.Option(
            "--cron", help='Five fields, e.g. "0 1 * * *", or @hourly, @daily, @nightly, @weekly, @monthly, @yearly.'
        ),
    ] = "",  # fmt: skip
    template: Annotated[
        int | None, typer.Option("--template", help="A job template's id, instead of a command.")
    ] = None,
    # busybox is built into every pool (make images): a shell command needs nothing more.
    image: Annotated[
        str, typer.Option("--image", "-i", help="With a command: a registered runtime image.")
    ] = "busybox",
    cpus: Annotated[int, typer.Option("--cpus", min=1)] = 1,
    memory: Annotated[str, typer.Option("--memory", help="512M, 2G…")] = "256M",
    gpus: Annotated[int, typer.Option("--gpus", min=0)] = 0,
    time_limit: Annotated[str, typer.Option("--time", help=units.TIME_HELP)] = "10m",
    output: Annotated[list[str] | None, typer.Option("--output", "-o", help="A glob under /output (repeat).")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", "-e", help="K=V in the job's environment (repeat).")] = None,
    array: Annotated[
        str | None, typer.Option("--array", "-a", help="Each run an array: 0-99, 1,3,5-7; %N at once.")
    ] = None,
    time_zone: Annotated[str | None, typer.Option("--time-zone", help="An IANA zone (default: the team's).")] = None,
    concurrency: Annotated[
        str, typer.Option("--concurrency", help="While the last run goes on: allow, forbid (skip) or replace.")
    ] = "allow",
    deadline: Annotated[
        str | None, typer.Option("--starting-deadline", help="A run later than this (seconds) is recorded missed.")
    ] = None,
    paused: Annotated[bool, typer.Option("--paused", help="Make it paused.")] = False,
    team: Annotated[str | None, typer.Option("--team", help="The team's slug, if you are in several.")] = None,
    as_json: AsJson = False,
) -> None:
    """Make a schedule of a template (--template ID) or of a command (after `--`); print its id and when it runs."""
    if not name or not cron:
        raise CliError("--name and --cron are needed", Exit.USAGE)
    if (template is None) == (not command):
        raise CliError("give either --template ID or a command after `--`, not both", Exit.USAGE)
    fields: dict[str, Any] = {"name": name, "cron": cron, "concurrency": concurrency, "paused": paused}
    if template is not None:
        fields["template"] = template
    else:
        fields["job"] = job_declaration(command or [], name, image, cpus, memory, gpus, time_limit, output, env, array)
    optional = {"time_zone": time_zone, "team": team}
    fields |= {field: value for field, value in optional.items() if value}
    if deadline is not None:
        fields["starting_deadline_s"] = parsed(int, deadline, "--starting-deadline")
    made = session.api().json("POST", "/schedules/", json=fields)
    if as_json:
        print_json(made)
        return
    say(out, str(made["id"]))
    say(err, f"{made['name']}: {made['description']} ({made['time_zone']}); next {made['next_runs'][0]}")


def job_declaration(
    command: list[str], name: str, image: str, cpus: int, memory: str, gpus: int, time_limit: str,
    output: list[str] | None, env: list[str] | None, array: str | None,
) -> dict[str, Any]:  # fmt: skip
    """A schedule's job as POST /api/v1/jobs/ takes it in JSON: `e31 submit`'s options."""
    environment = env_pairs(env)
    job: dict[str, Any] = {
        "name": name, "image": image, "command": command, "cpus": cpus,
        "memory_mb": parsed(units.memory_mb, memory, "--memory"), "gpus": gpus,
        "time_limit_s": units.time_limit(time_limit), "env": environment,
    }  # fmt: skip
    if output:
        job["outputs"] = output
    if array is not None:
        job |= array_fields(array)
    return job


def last_run_text(schedule: dict) -> str:
    run = schedule.get("last_run")
    if not run:
        return ""
    return " ".join(part for part in (run["planned_at"], run["status"], run.get("outcome") or "") if part)


def schedule_list(
    limit: Annotated[int, typer.Option("--limit", min=1)] = 100,
    as_json: AsJson = False,
) -> None:
    """Your teams' schedules: when each runs, its next time, its last run."""
    rows = session.api().pages("/schedules/", {}, limit)
    columns = ["ID", "NAME", "TEAM", "WHEN", "ZONE", "NEXT", "PAUSED", "LAST RUN"]
    print_rows(rows, as_json, columns, lambda s: (
        s["id"], s["name"], s["team"], s["description"], s["time_zone"], s["next_runs"][0] if s["next_runs"] else "",
        "paused" if s["paused"] else "", last_run_text(s),
    ))  # fmt: skip


def schedule_pause(schedule_id: ScheduleId) -> None:
    """Pause a schedule: nothing is submitted until it is resumed."""
    made = session.api().json("PATCH", f"/schedules/{schedule_id}/", json={"paused": True})
    say(out, f"schedule {made['id']} ({made['name']}) paused")


def schedule_resume(schedule_id: ScheduleId) -> None:
    """Resume a schedule from its next time (the times passed while paused are not caught up)."""
    made = session.api().json("PATCH", f"/schedules/{schedule_id}/", json={"paused": False})
    say(out, f"schedule {made['id']} ({made['name']}) resumed; next {made['next_runs'][0]}")


def schedule_delete(schedule_id: ScheduleId) -> None:
    """Delete a schedule (the jobs it submitted stay)."""
    session.api().request("DELETE", f"/schedules/{schedule_id}/")
    say(out, f"schedule {schedule_id} deleted")


def schedule_runs(
    schedule_id: ScheduleId,
    limit: Annotated[int, typer.Option("--limit", min=1)] = 50,
    as_json: AsJson = False,
) -> None:
    """A schedule's runs, newest first: each planned time submitted (its job or array), skipped, missed or refused."""
    rows = session.api().pages(f"/schedules/{schedule_id}/runs/", {}, limit)
    columns = ["PLANNED", "STATUS", "JOB", "OUTCOME", "REASON"]
    print_rows(rows, as_json, columns, lambda r: (
        r["planned_at"], r["status"], r["job"] or "", r.get("outcome") or "", r["reason"],
    ))  # fmt: skip
