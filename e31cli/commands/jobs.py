"""`e31 submit`, `cancel`, `list` and `show`: a job (or an array) declared from the command line, and read back."""

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from e31cli import session, units
from e31cli.commands.arrays import follow_array
from e31cli.commands.follow import excerpt_lines, follow
from e31cli.exits import CliError, Exit
from e31cli.session import (
    AsJson,
    JobId,
    ProgressFile,
    Since,
    Until,
    job_path,
    out,
    parsed,
    print_json,
    print_pairs,
    print_rows,
    read_by_server,
    say,
    transfer_progress,
)  # fmt: skip
from e31cli.terminal import visible


def submit(
    command: Annotated[list[str], typer.Argument(help="The command to run, after `--`.", show_default=False)],
    image: Annotated[str, typer.Option("--image", "-i", help="A registered runtime image.")],
    name: Annotated[str | None, typer.Option("--name", "-n", help="The job's name (default: the command).")] = None,
    cpus: Annotated[int, typer.Option("--cpus", min=1)] = 1,
    memory: Annotated[str, typer.Option("--memory", help="512M, 2G…")] = "256M",
    gpus: Annotated[int, typer.Option("--gpus", min=0)] = 0,
    time_limit: Annotated[str, typer.Option("--time", help=units.TIME_HELP)] = "10m",
    output: Annotated[list[str] | None, typer.Option("--output", "-o", help="A glob under /output (repeat).")] = None,
    data: Annotated[
        list[Path] | None,
        typer.Option("--data", "-d", help="A file staged at /data/<name> (repeat).", exists=True, dir_okay=False),
    ] = None,
    env: Annotated[list[str] | None, typer.Option("--env", "-e", help="K=V in the job's environment (repeat).")] = None,
    retries: Annotated[
        int,
        typer.Option(
            "--retry", "--retries", min=0, help="Times to try again on what --retry-on names (default: node lost)."
        ),
    ] = 0,
    retry_on: Annotated[
        list[str] | None,
        typer.Option("--retry-on", help="Retry on: exit codes, failed, out_of_memory, timed_out, node_lost (a,b)."),
    ] = None,
    retry_memory_factor: Annotated[
        float | None, typer.Option("--retry-memory-factor", min=1.0, help="Memory times this after out_of_memory.")
    ] = None,
    retry_delay: Annotated[
        str | None, typer.Option("--retry-delay", help="Wait before the first retry (30s, 5m), doubling each time.")
    ] = None,
    array: Annotated[
        str | None, typer.Option("--array", "-a", help="One task per index: 0-99, 1,3,5-7, 0-20:5; %N runs N at once.")
    ] = None,
    stop_after_failures: Annotated[
        int | None, typer.Option("--stop-after-failures", min=1, help="With --array: cancel the rest after N failed.")
    ] = None,
    after: Annotated[
        list[str] | None, typer.Option("--after", help="Start after a job or array: ok:ID, any:ID, notok:ID (repeat).")
    ] = None,
    inputs: Annotated[
        list[str] | None,
        typer.Option("--input", help="ID:GLOB: that job's outputs at /data/from/ID/ (repeat; implies ok:ID)."),
    ] = None,
    isolation: Annotated[str | None, typer.Option("--isolation", help="standard or strong (gVisor).")] = None,
    team: Annotated[str | None, typer.Option("--team", help="The team's slug, if you are in several.")] = None,
    queue: Annotated[str | None, typer.Option("--queue", help="The queue it waits in (default: the team's).")] = None,
    constraint: Annotated[
        str | None, typer.Option("--constraint", help="Node features it needs: bigmem&nvme, gpu-h100|gpu-a100.")
    ] = None,
    no_preempt: Annotated[
        bool, typer.Option("--no-preempt", help="Not to be preempted by a higher queue's job (if its queue allows).")
    ] = False,
    key: Annotated[
        str | None, typer.Option("--idempotency-key", help="Send again safely: the same key and job give one job.")
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait", "-w", help="Follow the job (every task) to its release; exit by its outcome.")
    ] = False,
    logs: Annotated[bool, typer.Option("--logs", help="With --wait: stream the job's log meanwhile.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the job (the array) as JSON.")] = False,
) -> None:
    """Submit a job (with --array, an array of them); print its id. With --wait, follow it and exit 0 only if
    it (every task) succeeded."""
    if not command:
        raise CliError("no command: put it after `--`, e.g. e31 submit --image python -- python3 -V", Exit.USAGE)
    if isolation not in (None, "standard", "strong"):
        raise CliError("--isolation: standard or strong", Exit.USAGE)
    if array is None and stop_after_failures is not None:
        raise CliError("--stop-after-failures: only with --array", Exit.USAGE)
    if array is not None and logs:
        raise CliError("--logs: follows one job; each task of an array has its own log (e31 logs TASK_ID)", Exit.USAGE)
    environment = env_pairs(env)
    fields: dict[str, Any] = {
        "name": name or " ".join(command)[:200],
        "image": image,
        "command": json.dumps(command),
        "cpus": str(cpus),
        "memory_mb": str(parsed(units.memory_mb, memory, "--memory")),
        "gpus": str(gpus),
        "time_limit_s": units.time_limit(time_limit),  # the server's one reader of durations parses it
        "max_retries": str(retries),
        "env": json.dumps(environment),
    }
    optional = {"outputs": output, "isolation": isolation, "team": team, "queue": queue, "constraint": constraint}
    fields |= {field: value for field, value in optional.items() if value}
    if no_preempt:
        fields["preemptable"] = "false"
    fields |= chain_fields(after or [], inputs or [])
    fields |= retry_fields(retry_on or [], retry_memory_factor, retry_delay)
    endpoint = "/jobs/"
    if array is not None:
        fields |= array_fields(array)
        if stop_after_failures is not None:
            fields["stop_after_failures"] = str(stop_after_failures)
        endpoint = "/arrays/"
    headers = {"Idempotency-Key": key} if key else {}
    client = session.api()
    with transfer_progress() as progress:
        files = []
        for path in data or []:
            task = progress.add_task(visible(f"uploading {path.name}"), total=path.stat().st_size)
            files.append(("data", (path.name, ProgressFile(path, progress, task), "application/octet-stream")))
        try:
            # httpx sends a multipart body when there are files; a form body otherwise.
            made = client.json("POST", endpoint, data=fields, files=files or None, headers=headers)
        finally:
            for _, (_, handle, _) in files:
                handle.close()
    if not wait:
        print_json(made) if as_json else say(out, made["id"])
        return
    if not as_json:
        say(out, made["id"])
        sys.stdout.flush()
    if array is not None:
        raise typer.Exit(int(follow_array(client, made["id"], as_json=as_json)))
    raise typer.Exit(int(follow(client, made["id"], stream_logs=logs, as_json=as_json)))


def chain_fields(after: list[str], inputs: list[str]) -> dict[str, str | list[str]]:
    fields: dict[str, list[str]] = {}
    for text in after:
        field, target = parsed(units.after, text, "--after")
        fields.setdefault(field, []).append(target)
    if inputs:
        fields["inputs_from"] = [parsed(units.job_input, text, "--input") for text in inputs]
    return dict(fields)


def retry_fields(retry_on: list[str], memory_factor: float | None, delay: str | None) -> dict[str, str | list[str]]:
    """The retry rules beside max_retries; none sent leaves the server's defaults (retry on node_lost)."""
    fields: dict[str, str | list[str]] = {}
    if retry_on:
        fields["retry_on"] = units.listed(retry_on)
    if memory_factor is not None:
        fields["retry_memory_factor"] = f"{memory_factor:g}"
    if delay is not None:
        fields["retry_delay_s"] = delay  # as typed, read by the server as --time is
    return fields


def cancel(job_id: JobId) -> None:
    """Cancel a job (a released one stays as it was)."""
    job = session.api().json("POST", f"{job_path(job_id)}cancel/")
    say(out, f"job {job['id']}: {job['stage']}" + (f" ({job['outcome']})" if job.get("outcome") else ""))


def list_jobs(
    stage: Annotated[str | None, typer.Option("--stage", help="submit, rent, run, output or release.")] = None,
    outcome: Annotated[str | None, typer.Option("--outcome", help="succeeded, failed, timed_out…")] = None,
    since: Since = None,
    until: Until = None,
    user: Annotated[str | None, typer.Option("--user", help="Submitted by this username.")] = None,
    image: Annotated[str | None, typer.Option("--image")] = None,
    team: Annotated[str | None, typer.Option("--team")] = None,
    query: Annotated[str | None, typer.Option("--query", "-q", help="Words in the name or command.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1)] = 50,
    as_json: AsJson = False,
) -> None:
    """Your team's jobs, newest first (as squeue and sacct)."""
    params = {
        "stage": stage,
        "outcome": outcome,
        "since": since,  # as typed: the server reads a moment or a duration back from now
        "until": until,
        "user": user,
        "image": image,
        "team": team,
        "q": query,
    }
    with read_by_server(since="--since", until="--until"):
        rows = session.api().pages("/jobs/", {k: v for k, v in params.items() if v}, limit)
    columns = ["ID", "NAME", "TEAM", "IMAGE", "STAGE", "OUTCOME", "EXIT", "SUBMITTED"]
    print_rows(rows, as_json, columns, lambda job: (
        job["id"], job["name"], job["team"], job["image"], job["stage"], job["outcome"] or "",
        "" if job["exit_code"] is None else job["exit_code"], job["submitted_at"],
    ))  # fmt: skip


def show(job_id: JobId, as_json: AsJson = False) -> None:
    """One job: its request, steps, hold and record."""
    job = session.api().json("GET", job_path(job_id))
    if as_json:
        print_json(job)
        return
    request = job["request"]
    rows = [
        ("id", job["id"]), ("name", job["name"]), ("team", job["team"]), ("image", job["image"]),
        ("command", " ".join(job["command"])),
        ("request", f"{request['cpus']} cpus, {request['memory_mb']} MB, {request['gpus']} gpus, "
                    f"{request['time_limit_s']} s"),
        ("stage", job["stage"]), ("outcome", job["outcome"] or ""),
        ("exit code", "" if job["exit_code"] is None else str(job["exit_code"])), ("reason", job["reason"] or ""),
        ("submitted", job["submitted_at"]), ("held", job["held_at"] or ""), ("started", job["started_at"] or ""),
        ("finished", job["finished_at"] or ""), ("released", job["released_at"] or ""),
    ]  # fmt: skip
    if job.get("array"):
        rows.insert(2, ("array", f"{job['array']} index {job.get('array_index')}"))
    # After the outcome and the reason, why it ended in its own words: a row per line of the excerpt.
    after_reason = [label for label, _ in rows].index("reason") + 1
    excerpt = excerpt_lines(job)
    rows[after_reason:after_reason] = [("last lines" if i == 0 else "", line) for i, line in enumerate(excerpt)]
    if hold := job.get("hold"):
        rows.append(("hold", f"{hold['node']} cpus {hold['cpu_set']} {hold['memory_mb']} MB"))
    if record := job.get("record"):
        rows.append(("record", f"#{record['sequence']} {record['held_seconds']} s held, cost {record['cost']}"))
    rows.append(("queue", policy_text(job)))
    if standing := job.get("standing"):
        rows.append(("waits", f"#{standing['position']} of {standing['queued']}: {standing['reason']}"))
    elif job["stage"] == "submit" and job.get("wait_reason"):  # held back: not in the queue yet
        rows.append(("waits", job["wait_reason"]))
    for field, label in CHAIN_ROWS.items():
        rows += [(label if i == 0 else "", value) for i, value in enumerate(job.get(field) or [])]
    if job.get("max_retries"):
        rows.append(("retries", retry_rules(job)))
    attempts = job.get("attempts") or []
    if len(attempts) > 1:  # a job tried once says all of it above
        rows += [("attempts" if i == 0 else "", attempt_line(a)) for i, a in enumerate(attempts)]
    print_pairs(rows)


def policy_text(job: dict) -> str:
    """E.g. "urgent", "batch, needs bigmem&nvme, not preemptable"."""
    said = [job.get("queue") or "default"]
    if job.get("constraint"):
        said.append(f"needs {job['constraint']}")
    if job.get("preemptable") is False:
        said.append("not preemptable")
    return ", ".join(said)


CHAIN_ROWS = {"after_ok": "after ok", "after_any": "after any", "after_not_ok": "after not ok",
              "inputs_from": "inputs from"}  # fmt: skip


def retry_rules(job: dict) -> str:
    line = f"{job['max_retries']} on {', '.join(job.get('retry_on') or ['node_lost'])}"
    if (factor := job.get("retry_memory_factor")) and factor != 1:
        line += f", memory x{factor:g} after out_of_memory"
    if delay := job.get("retry_delay_s"):
        line += f", {delay} s before the first (doubling)"
    return line


def attempt_line(attempt: dict) -> str:
    line = f"#{attempt['attempt']} {attempt.get('outcome') or 'current'}"
    if attempt.get("exit_code") is not None:
        line += f" (exit {attempt['exit_code']})"
    if attempt.get("memory_mb") is not None:
        line += f", {attempt['memory_mb']} MB"
    if attempt.get("held_at"):
        line += f", held {attempt['held_at']}"
    if attempt.get("released_at"):
        line += f", released {attempt['released_at']}"
    return line + (f": {attempt['reason']}" if attempt.get("reason") else "")


def array_fields(text: str) -> dict[str, Any]:
    """`--array 0-99%8` as the fields `indices` and `max_running`."""
    indices, max_running = parsed(units.array, text, "--array")
    return {"indices": indices} | ({} if max_running is None else {"max_running": max_running})


def env_pairs(env: list[str] | None) -> dict[str, str]:
    environment = {}
    for pair in env or []:
        k, sep, v = pair.partition("=")
        if not sep or not k:
            raise CliError(f"--env: {pair!r} is not K=V", Exit.USAGE)
        environment[k] = v
    return environment
