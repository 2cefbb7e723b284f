"""The `e31` commands: each ends with an exit code of e31cli.exits and, on an error, one line on stderr."""

import contextlib
import functools
import hashlib
import io
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, ParamSpec, TypeVar
from urllib.parse import quote

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn
from rich.table import Table
from rich.text import Text

from e31cli import units
from e31cli.client import Api
from e31cli.config import Config, config_path, load, save
from e31cli.exits import OUTCOME_EXITS, CliError, Exit
from e31cli.terminal import LogText, json_visible, visible

app = typer.Typer(
    name="e31",
    help="Submit and follow batch jobs on an E31 Network pool (configure with E31_URL and E31_TOKEN, or `e31 login`).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
# Markup and emoji codes off: what is printed is data (a job named `[/x]` or `:bomb:` is shown as it is).
out = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)

P = ParamSpec("P")
R = TypeVar("R")
POLL_S = 1.0
MAX_POLL_S = 5.0
RELEASE = "release"


def handled(command: Callable[P, R]) -> Callable[P, R]:
    """One line on stderr and the documented exit code for every failure; never a traceback."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except CliError as exc:
            err.print(f"e31: {visible(str(exc))}")
            raise typer.Exit(int(exc.code)) from None
        except KeyboardInterrupt:
            err.print("e31: interrupted")
            raise typer.Exit(130) from None
        except typer.Exit:
            raise
        except Exception as exc:  # a bug of ours: one line still, and a code no outcome uses
            err.print(f"e31: unexpected error: {type(exc).__name__}: {visible(str(exc))}")
            raise typer.Exit(70) from None

    return wrapper


def subcommand(
    name: str | None = None, *, on: typer.Typer = app, **settings: Any
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A command of `on` (the app, or a group of it) whose failures `handled` reports."""
    return lambda function: on.command(name, **settings)(handled(function))


JobId = Annotated[str, typer.Argument(metavar="ID")]
AsJson = Annotated[bool, typer.Option("--json")]
Since = Annotated[str | None, typer.Option("--since", help="An ISO date or date-time, or 24h, 7d…")]
Until = Annotated[str | None, typer.Option("--until")]


def api(*, need_token: bool = True) -> Api:
    return Api(load(need_token=need_token))


def print_json(value: Any) -> None:
    sys.stdout.write(json_visible(json.dumps(value, indent=2, ensure_ascii=False)) + "\n")


def parsed(parse: Callable[[str], Any], value: str, option: str) -> Any:
    try:
        return parse(value)
    except ValueError as exc:
        raise CliError(f"{option}: {exc}", Exit.USAGE) from None


def say(console: Console, text: str) -> None:
    console.print(visible(text))


def add_row(table: Table, *values: object) -> None:
    table.add_row(*(visible(str(value)) for value in values))


def print_rows(rows: list[dict], as_json: bool, columns: list[str], cells: Callable[[dict], tuple]) -> None:
    """The rows as JSON, or as a table of `columns` whose cells `cells` picks from each row."""
    if as_json:
        print_json(rows)
        return
    table = Table(*columns, box=None)
    for row in rows:
        add_row(table, *cells(row))
    out.print(table)


def job_path(job_id: str) -> str:
    return f"/jobs/{quote(job_id, safe='')}/"


def array_path(array_id: str) -> str:
    return f"/arrays/{quote(array_id, safe='')}/"


class ProgressFile(io.FileIO):
    """A data file that advances a progress bar as httpx reads it into the request."""

    def __init__(self, path: Path, progress: Progress, task: Any) -> None:
        super().__init__(path, "rb")
        self.progress, self.task = progress, task

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        self.progress.advance(self.task, len(chunk or b""))
        return chunk or b""


def transfer_progress() -> Progress:
    return Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )


@subcommand(context_settings={"allow_interspersed_args": False})
def submit(
    command: Annotated[list[str], typer.Argument(help="The command to run, after `--`.", show_default=False)],
    image: Annotated[str, typer.Option("--image", "-i", help="A registered runtime image.")],
    name: Annotated[str | None, typer.Option("--name", "-n", help="The job's name (default: the command).")] = None,
    cpus: Annotated[int, typer.Option("--cpus", min=1)] = 1,
    memory: Annotated[str, typer.Option("--memory", help="512M, 2G…")] = "256M",
    gpus: Annotated[int, typer.Option("--gpus", min=0)] = 0,
    time_limit: Annotated[str, typer.Option("--time", help="The time limit: 600 (s), 90m, 2h, 1h30m, 1d.")] = "10m",
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
    fields: dict[str, str | list[str]] = {
        "name": name or " ".join(command)[:200],
        "image": image,
        "command": json.dumps(command),
        "cpus": str(cpus),
        "memory_mb": str(parsed(units.memory_mb, memory, "--memory")),
        "gpus": str(gpus),
        "time_limit_s": time_limit,  # as typed: the server's one reader of durations parses it
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
        indices, max_running = parsed(units.array, array, "--array")
        fields["indices"] = indices
        if max_running is not None:
            fields["max_running"] = str(max_running)
        if stop_after_failures is not None:
            fields["stop_after_failures"] = str(stop_after_failures)
        endpoint = "/arrays/"
    headers = {"Idempotency-Key": key} if key else {}
    client = api()
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
    """`--after` and `--input` as the repeatable form fields after_ok, after_any, after_not_ok, inputs_from."""
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


def follow(
    client: Api, job_id: str, *, stream_logs: bool = False, as_json: bool = False, first: dict | None = None
) -> Exit:
    """Poll the job until its release (with its log on stdout when asked); return its outcome's exit code.
    `first` is an answer for the job just read, used for the first poll."""
    offset, stage, delay = 0, "", POLL_S
    log = LogSink()
    live = err.is_terminal and not stream_logs
    with err.status("", spinner="dots") if live else contextlib.nullcontext() as status:
        while True:
            job, first = first or client.json("GET", job_path(job_id)), None
            line = visible(status_line(job))
            if status is not None:
                status.update(Text(line))  # a str would be read as markup by the spinner
            elif job["stage"] != stage:
                err.print(line)
            moved = job["stage"] != stage
            stage = job["stage"]
            if stream_logs:
                offset, _ = copy_log(client, job_id, offset, log, until_end=stage == RELEASE)
            if stage == RELEASE:
                if stream_logs:
                    log.end()
                break
            delay = POLL_S if moved else min(delay * 1.5, MAX_POLL_S)
            time.sleep(delay)
    outcome = job.get("outcome") or ""
    if as_json:
        print_json(job)
    ending = f"job {job_id}: {outcome}"
    if job.get("exit_code") is not None:
        ending += f" (exit {job['exit_code']})"
    if job.get("reason"):
        ending += f": {job['reason']}"
    say(err, ending)
    if lines := excerpt_lines(job):
        say(err, "last lines of its log:")
        for line in lines:
            say(err, f"  {line}")
    return OUTCOME_EXITS.get(outcome, Exit.FAILED)


def excerpt_lines(job: dict) -> list[str]:
    """The failure excerpt's lines of a released job that did not succeed (none for a success or a job
    still running); made safe for a terminal by `say` or `add_row`, as all data of the server."""
    if job.get("stage") != RELEASE or job.get("outcome") in ("", None, "succeeded"):
        return []
    return (job.get("failure_excerpt") or "").splitlines()


def status_line(job: dict) -> str:
    line = f"job {job['id']}: {job['stage']}"
    standing = job.get("standing")
    if job["stage"] == "submit" and standing:
        line += f" (#{standing['position']} of {standing['queued']}: {standing['reason']})"
    elif job["stage"] == "submit" and job.get("wait_reason"):  # held back by a dependency, max_running, a delay
        line += f" ({job['wait_reason']})"
    elif job.get("hold"):
        line += f" on {job['hold']['node']}"
    return line


class LogSink:
    """A job's log on stdout: text safe for a terminal, or with `raw` the bytes as they are."""

    def __init__(self, *, raw: bool = False) -> None:
        self.text = None if raw else LogText()

    def write(self, chunk: bytes) -> None:
        self._out(chunk if self.text is None else self.text.feed(chunk))

    def end(self) -> None:
        if self.text is not None:
            self._out(self.text.end())

    def _out(self, data: bytes) -> None:
        if data:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()


def copy_log(client: Api, job_id: str, offset: int, log: LogSink, *, until_end: bool = False) -> tuple[int, str]:
    """Write the job's log from `offset` to `log`; return the next offset and the job's stage at the last read."""
    while True:
        response = client.request("GET", f"{job_path(job_id)}logs/", params={"offset": str(offset)})
        log.write(response.content)
        next_offset = int(response.headers.get("X-Next-Offset", offset + len(response.content)))
        if not until_end or next_offset == offset:
            return next_offset, response.headers.get("X-Job-Stage", "")
        offset = next_offset


# The order counts are shown in: a task's way through the stages, then the outcomes, failures last.
COUNTED = ["submit", "rent", "run", "output", "succeeded", "cancelled", "rejected", "preempted", "node_lost",
           "timed_out", "out_of_memory", "failed"]  # fmt: skip


def counted(counts: dict[str, int]) -> list[tuple[str, int]]:
    """An array's counts in a steady order (names the CLI does not know yet last), those of no task left out."""
    known = [(name, counts[name]) for name in COUNTED if counts.get(name)]
    return known + sorted((name, n) for name, n in counts.items() if n and name not in COUNTED)


def counts_text(array: dict) -> str:
    return ", ".join(f"{n} {name}" for name, n in counted(array.get("counts") or {})) or "no tasks"


def array_exit(array: dict) -> Exit:
    """0 only when every task succeeded; otherwise the code of a failed job, whatever the tasks' outcomes."""
    return Exit.SUCCEEDED if [name for name, _ in counted(array["counts"])] == ["succeeded"] else Exit.FAILED


def follow_array(client: Api, array_id: str, *, as_json: bool = False, first: dict | None = None) -> Exit:
    """Poll the array until every task is released; return 0 if all succeeded, else the code of a failed job."""
    stage, counts, delay = "", None, POLL_S
    with err.status("", spinner="dots") if err.is_terminal else contextlib.nullcontext() as status:
        while True:
            array, first = first or client.json("GET", array_path(array_id)), None
            line = visible(f"array {array['id']}: {array['stage']} ({counts_text(array)})")
            if status is not None:
                status.update(Text(line))
            elif array["stage"] != stage:  # a line per stage in a log, not one per task
                err.print(line)
            moved = array["counts"] != counts
            stage, counts = array["stage"], array["counts"]
            if stage == RELEASE:
                break
            delay = POLL_S if moved else min(delay * 1.5, MAX_POLL_S)
            time.sleep(delay)
    if as_json:
        print_json(array)
    say(err, f"array {array_id}: {counts_text(array)}")
    code = array_exit(array)
    if code != Exit.SUCCEEDED:
        say(err, f"its tasks: e31 array {array_id} --tasks [--outcome failed]")
    return code


@subcommand("wait")
def wait_command(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="A job's id or an array's.")],
    logs: Annotated[bool, typer.Option("--logs", help="Stream the job's log meanwhile.")] = False,
    as_json: AsJson = False,
) -> None:
    """Wait for a job's release, or every task of an array; exit by its outcome (0 only if it, or every
    task, succeeded)."""
    client = api()
    if (job := find_job(client, job_id)) is not None:
        raise typer.Exit(int(follow(client, job_id, stream_logs=logs, as_json=as_json, first=job)))
    array = find_array(client, job_id)
    if logs:
        raise CliError(f"--logs: {job_id} is an array; each task has its own log (e31 logs TASK_ID)", Exit.USAGE)
    raise typer.Exit(int(follow_array(client, job_id, as_json=as_json, first=array)))


def find_job(client: Api, job_id: str) -> dict | None:
    """The job of that id, or None when there is none (the id may be an array's: both are UUIDs)."""
    try:
        return dict(client.json("GET", job_path(job_id)))
    except CliError as exc:
        if exc.code != Exit.NOT_FOUND:
            raise
        return None


def find_array(client: Api, array_id: str) -> dict:
    """The array of an id that is no job's; a 404 for it names both."""
    try:
        return dict(client.json("GET", array_path(array_id)))
    except CliError as exc:
        if exc.code != Exit.NOT_FOUND:
            raise
        raise CliError(f"not found: no job or array {array_id} of your teams", Exit.NOT_FOUND) from None


@subcommand("array")
def array_command(
    array_id: Annotated[str, typer.Argument(metavar="ID")],
    tasks: Annotated[bool, typer.Option("--tasks", help="List its tasks, in index order.")] = False,
    outcome: Annotated[str | None, typer.Option("--outcome", help="With --tasks: only those of this outcome.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="With --tasks: at most this many.")] = 100,
    as_json: AsJson = False,
) -> None:
    """An array: its size, stage and how many tasks are at each stage or outcome (with --tasks, the tasks)."""
    client = api()
    if tasks:
        params = {"outcome": outcome} if outcome else {}
        found = client.pages(f"{array_path(array_id)}tasks/", params, limit)
        print_rows(found, as_json, ["INDEX", "ID", "STAGE", "OUTCOME", "EXIT", "REASON"], lambda job: (
            job.get("array_index", ""), job["id"], job["stage"], job["outcome"] or "",
            "" if job["exit_code"] is None else job["exit_code"], job["reason"] or "",
        ))  # fmt: skip
        return
    array = client.json("GET", array_path(array_id))
    if as_json:
        print_json(array)
        return
    rows: list[tuple[str, object]] = [("id", array["id"])]
    if array.get("name"):
        rows.append(("name", array["name"]))
    max_running = array.get("max_running")
    rows += [
        ("size", array["size"]),
        ("max running", "no limit" if max_running is None else max_running),
        ("stage", array["stage"]),
    ]
    if array.get("stop_after_failures") is not None:
        rows.append(("stop after", f"{array['stop_after_failures']} failed"))
    if array.get("stop_reason"):
        rows.append(("stopped", array["stop_reason"]))
    rows += [(name, n) for name, n in counted(array["counts"])]
    table = Table(box=None, show_header=False)
    for label, value in rows:
        add_row(table, label, value)
    out.print(table)


@subcommand()
def logs(
    job_id: JobId,
    follow_log: Annotated[bool, typer.Option("--follow", "-f", help="Keep reading until the job is released.")] = False,
    raw: Annotated[
        bool, typer.Option("--raw", help="The log's bytes as they are, terminal escapes included (for a file).")
    ] = False,
) -> None:
    """Print a job's log (with --follow, as it grows, until the job is released). Control characters
    but line ends and tabs are shown as escapes (\x1b, \r…) unless --raw."""
    client = api()
    log = LogSink(raw=raw)
    offset, stage = copy_log(client, job_id, 0, log, until_end=True)
    delay = POLL_S
    # Ends at a read that found nothing new once the job was released: its log is whole then.
    while follow_log and stage != RELEASE:
        time.sleep(delay)
        before = offset
        offset, stage = copy_log(client, job_id, offset, log, until_end=True)
        delay = POLL_S if offset != before else min(delay * 1.5, MAX_POLL_S)
    log.end()


@subcommand()
def cancel(job_id: JobId) -> None:
    """Cancel a job (a released one stays as it was)."""
    job = api().json("POST", f"{job_path(job_id)}cancel/")
    say(out, f"job {job['id']}: {job['stage']}" + (f" ({job['outcome']})" if job.get("outcome") else ""))


def when_param(value: str | None, option: str) -> str | None:
    return parsed(units.when, value, option) if value else None


@subcommand("list")
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
        "since": when_param(since, "--since"),
        "until": when_param(until, "--until"),
        "user": user,
        "image": image,
        "team": team,
        "q": query,
    }
    rows = api().pages("/jobs/", {k: v for k, v in params.items() if v}, limit)
    columns = ["ID", "NAME", "TEAM", "IMAGE", "STAGE", "OUTCOME", "EXIT", "SUBMITTED"]
    print_rows(rows, as_json, columns, lambda job: (
        job["id"], job["name"], job["team"], job["image"], job["stage"], job["outcome"] or "",
        "" if job["exit_code"] is None else job["exit_code"], job["submitted_at"],
    ))  # fmt: skip


@subcommand()
def show(job_id: JobId, as_json: AsJson = False) -> None:
    """One job: its request, steps, hold and record."""
    job = api().json("GET", job_path(job_id))
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
    table = Table(box=None, show_header=False)
    for label, value in rows:
        add_row(table, label, value)
    out.print(table)


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


@subcommand()
def outputs(
    job_id: JobId,
    download: Annotated[
        Path | None, typer.Option("--download", help="Download them into this folder, checking each sha256.")
    ] = None,
    as_json: AsJson = False,
) -> None:
    """A job's outputs (path, size, sha256); with --download, fetch and verify them."""
    client = api()
    files = client.json("GET", f"{job_path(job_id)}outputs/")
    if download is None:
        print_rows(files, as_json, ["PATH", "SIZE", "SHA256"], lambda f: (f["path"], f["size"], f["sha256"]))
        return
    download.mkdir(parents=True, exist_ok=True)
    with transfer_progress() as progress:
        for f in files:
            fetch_output(client, job_id, f, download, progress)
    say(err, f"{len(files)} output(s) of job {job_id} in {download}, each sha256 verified")


def fetch_output(client: Api, job_id: str, listed: dict, folder: Path, progress: Progress) -> None:
    relative = PurePosixPath(listed["path"])
    if relative.is_absolute() or ".." in relative.parts:
        raise CliError(f"refusing the output path {listed['path']!r}: it leaves the folder", Exit.CHECKSUM)
    target = folder.joinpath(*relative.parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    digest = hashlib.sha256()
    task = progress.add_task(visible(f"downloading {relative}"), total=listed["size"])
    with client.stream(f"{job_path(job_id)}outputs/{quote(listed['path'])}") as response, partial.open("wb") as handle:
        for chunk in response.iter_bytes():
            digest.update(chunk)
            handle.write(chunk)
            progress.advance(task, len(chunk))
    if digest.hexdigest() != listed["sha256"]:
        partial.unlink()
        raise CliError(
            f"{relative}: sha256 {digest.hexdigest()} does not match the job's {listed['sha256']}", Exit.CHECKSUM
        )
    os.replace(partial, target)
    say(out, f"verified {relative}  {listed['size']} bytes  sha256 {listed['sha256']}")


@subcommand()
def usage(
    since: Since = None,
    until: Until = None,
    group_by: Annotated[str, typer.Option("--group-by", help="day, team or node.")] = "day",
    as_json: AsJson = False,
) -> None:
    """What your teams used: totals by day, team or node, then the per-job records (as sacct)."""
    client = api()
    params = {
        k: v for k, v in {"since": when_param(since, "--since"), "until": when_param(until, "--until")}.items() if v
    }
    totals = client.json("GET", "/accounting/usage/", params={**params, "group_by": group_by})
    records = client.pages("/accounting/records/", params, 1000)
    if as_json:
        print_json({"usage": totals, "records": records})
        return
    rows = totals["rows"]
    if rows:
        table = Table(*[visible(column.upper()) for column in rows[0]], box=None, title="usage")
        for row in rows:
            add_row(table, *[units.figure(column, value) for column, value in row.items()])
        out.print(table)
    table = Table(
        "JOB", "TEAM", "NODE", "CPUS", "HELD S", "CPU S", "COST", "OUTCOME", "RELEASED", box=None, title="records"
    )
    for r in records:
        add_row(
            table, r["job"], r["team"], r["node"], r["cpus"], units.figure("held_seconds", r["held_seconds"]),
            units.figure("cpu_seconds", r["cpu_seconds"]), f'{units.figure("cost", r["cost"])} {r.get("currency", "")}',
            r["outcome"], r["released_at"],
        )  # fmt: skip
    out.print(table)


@subcommand()
def nodes(as_json: AsJson = False) -> None:
    """The pool's nodes and their free capacity."""
    columns = ["NODE", "STATE", "CPUS", "FREE CPUS", "MEMORY MB", "FREE MB", "GPUS", "HEARTBEAT"]
    print_rows(api().json("GET", "/pool/nodes/"), as_json, columns, lambda n: (
        n["name"], n["state"], n["cpus"], n["free"]["cpus"], n["memory_mb"], n["free"]["memory_mb"], n["gpus"],
        n["last_heartbeat"] or "",
    ))  # fmt: skip


@subcommand()
def login(
    url: Annotated[str | None, typer.Option("--url", help="The site, e.g. http://127.0.0.1:8000.")] = None,
    token: Annotated[str | None, typer.Option("--token", help="An API token (asked for when missing).")] = None,
) -> None:
    """Check a URL and token against the server and keep them in ~/.config/e31/config (mode 0600)."""
    current = load(need_token=False)
    url = (url or typer.prompt("URL", default=current.url)).rstrip("/")
    token = token or typer.prompt("Token", hide_input=True)
    client = Api(Config(url=url, token=token))
    client.json("GET", "/tokens/")  # a bad token or URL ends here, before anything is written
    path = save(Config(url=url, token=token))
    say(out, f"logged in to {url}; token kept in {path}")


schedule_app = typer.Typer(help="Schedules: a job or template submitted at each time a cron line names.")
app.add_typer(schedule_app, name="schedule")
ScheduleId = Annotated[int, typer.Argument(metavar="ID")]


@subcommand("create", on=schedule_app)
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
    time_limit: Annotated[str, typer.Option("--time", help="The time limit: 600 (s), 90m, 2h, 1h30m, 1d.")] = "10m",
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
    made = api().json("POST", "/schedules/", json=fields)
    if as_json:
        print_json(made)
        return
    say(out, str(made["id"]))
    say(err, f"{made['name']}: {made['description']} ({made['time_zone']}); next {made['next_runs'][0]}")


def env_pairs(env: list[str] | None) -> dict[str, str]:
    """--env K=V options as the job's environment."""
    environment = {}
    for pair in env or []:
        k, sep, v = pair.partition("=")
        if not sep or not k:
            raise CliError(f"--env: {pair!r} is not K=V", Exit.USAGE)
        environment[k] = v
    return environment


def job_declaration(
    command: list[str], name: str, image: str, cpus: int, memory: str, gpus: int, time_limit: str,
    output: list[str] | None, env: list[str] | None, array: str | None,
) -> dict[str, Any]:  # fmt: skip
    """A schedule's job as POST /api/v1/jobs/ takes it in JSON: `e31 submit`'s options."""
    environment = env_pairs(env)
    job: dict[str, Any] = {
        "name": name, "image": image, "command": command, "cpus": cpus,
        "memory_mb": parsed(units.memory_mb, memory, "--memory"), "gpus": gpus, "time_limit_s": time_limit,
        "env": environment,
    }  # fmt: skip
    if output:
        job["outputs"] = output
    if array is not None:
        indices, max_running = parsed(units.array, array, "--array")
        job["indices"] = indices
        if max_running is not None:
            job["max_running"] = max_running
    return job


def last_run_text(schedule: dict) -> str:
    run = schedule.get("last_run")
    if not run:
        return ""
    return " ".join(part for part in (run["planned_at"], run["status"], run.get("outcome") or "") if part)


@subcommand("list", on=schedule_app)
def schedule_list(
    limit: Annotated[int, typer.Option("--limit", min=1)] = 100,
    as_json: AsJson = False,
) -> None:
    """Your teams' schedules: when each runs, its next time, its last run."""
    rows = api().pages("/schedules/", {}, limit)
    columns = ["ID", "NAME", "TEAM", "WHEN", "ZONE", "NEXT", "PAUSED", "LAST RUN"]
    print_rows(rows, as_json, columns, lambda s: (
        s["id"], s["name"], s["team"], s["description"], s["time_zone"], s["next_runs"][0] if s["next_runs"] else "",
        "paused" if s["paused"] else "", last_run_text(s),
    ))  # fmt: skip


@subcommand("pause", on=schedule_app)
def schedule_pause(schedule_id: ScheduleId) -> None:
    """Pause a schedule: nothing is submitted until it is resumed."""
    made = api().json("PATCH", f"/schedules/{schedule_id}/", json={"paused": True})
    say(out, f"schedule {made['id']} ({made['name']}) paused")


@subcommand("resume", on=schedule_app)
def schedule_resume(schedule_id: ScheduleId) -> None:
    """Resume a schedule from its next time (the times passed while paused are not caught up)."""
    made = api().json("PATCH", f"/schedules/{schedule_id}/", json={"paused": False})
    say(out, f"schedule {made['id']} ({made['name']}) resumed; next {made['next_runs'][0]}")


@subcommand("delete", on=schedule_app)
def schedule_delete(schedule_id: ScheduleId) -> None:
    """Delete a schedule (the jobs it submitted stay)."""
    api().request("DELETE", f"/schedules/{schedule_id}/")
    say(out, f"schedule {schedule_id} deleted")


@subcommand("runs", on=schedule_app)
def schedule_runs(
    schedule_id: ScheduleId,
    limit: Annotated[int, typer.Option("--limit", min=1)] = 50,
    as_json: AsJson = False,
) -> None:
    """A schedule's runs, newest first: each planned time submitted (its job or array), skipped, missed or refused."""
    rows = api().pages(f"/schedules/{schedule_id}/runs/", {}, limit)
    columns = ["PLANNED", "STATUS", "JOB", "OUTCOME", "REASON"]
    print_rows(rows, as_json, columns, lambda r: (
        r["planned_at"], r["status"], r["job"] or "", r.get("outcome") or "", r["reason"],
    ))  # fmt: skip


tokens_app = typer.Typer(help="Your API tokens: make, list, revoke (the Account page does the same).")
app.add_typer(tokens_app, name="tokens")


@subcommand("list", on=tokens_app)
def tokens_list(as_json: AsJson = False) -> None:
    """Your tokens (an operator's: everyone's), by name and first characters; never the keys."""
    rows = api().pages("/tokens/", {}, 1000)
    columns = ["ID", "NAME", "STARTS WITH", "USER", "MADE"]
    print_rows(rows, as_json, columns, lambda t: (t["id"], t["name"], t["prefix"], t["user"], t["created_at"]))


@subcommand("create", on=tokens_app)
def tokens_create(name: Annotated[str, typer.Argument(help="What it is for, e.g. 'nightly cron'.")]) -> None:
    """Make a token; its key is printed once, on stdout (only its hash is kept)."""
    token = api().json("POST", "/tokens/", json={"name": name})
    say(out, token["key"])
    say(err, f"token {token['id']} ({token['name']}): keep the key now, it is not shown again")


@subcommand("revoke", on=tokens_app)
def tokens_revoke(token_id: Annotated[int, typer.Argument(metavar="ID")]) -> None:
    """Revoke a token (yours; an operator, anyone's): its key stops working at once."""
    api().request("DELETE", f"/tokens/{token_id}/")
    say(out, f"token {token_id} revoked")


@subcommand()
def config() -> None:
    """Where the configuration comes from (the token is not shown)."""
    current = load(need_token=False)
    say(out, f"url {current.url}")
    source = "E31_TOKEN" if os.environ.get("E31_TOKEN") else str(config_path())
    say(out, f"token {'set' if current.token else 'missing'} ({source})")
