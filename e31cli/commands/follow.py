"""`e31 wait` and `e31 logs`: a job followed to its release, its log copied as it grows."""

import sys
import time
from typing import Annotated

import typer

from e31cli import session
from e31cli.client import Api
from e31cli.commands.arrays import follow_array
from e31cli.exits import OUTCOME_EXITS, CliError, Exit
from e31cli.session import MAX_POLL_S, POLL_S, RELEASE, AsJson, JobId, array_path, err, job_path, poll, print_json, say
from e31cli.terminal import LogText


def follow(
    client: Api, job_id: str, *, stream_logs: bool = False, as_json: bool = False, first: dict | None = None
) -> Exit:
    """Poll the job until its release (its log when asked: on stdout, or on stderr beside --json, so that stdout
    is the JSON alone); return its outcome's exit code."""
    offset, log = 0, LogSink(to_stderr=as_json)

    def copy(job: dict) -> None:
        nonlocal offset
        if stream_logs:
            offset, _ = copy_log(client, job_id, offset, log, until_end=job["stage"] == RELEASE)

    job = poll(client, job_path(job_id), status_line, live=err.is_terminal and not stream_logs, first=first, each=copy)
    if stream_logs:
        log.end()
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
    """The failure excerpt's lines of a released job that did not succeed."""
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
    def __init__(self, *, raw: bool = False, to_stderr: bool = False) -> None:
        self.text = None if raw else LogText()
        self.to_stderr = to_stderr

    def write(self, chunk: bytes) -> None:
        self._out(chunk if self.text is None else self.text.feed(chunk))

    def end(self) -> None:
        if self.text is not None:
            self._out(self.text.end())

    def _out(self, data: bytes) -> None:
        if data:
            stream = sys.stderr if self.to_stderr else sys.stdout
            stream.buffer.write(data)
            stream.flush()


def copy_log(client: Api, job_id: str, offset: int, log: LogSink, *, until_end: bool = False) -> tuple[int, str]:
    """Return the next offset and the job's stage at the last read."""
    while True:
        response = client.request("GET", f"{job_path(job_id)}logs/", params={"offset": str(offset)})
        log.write(response.content)
        next_offset = int(response.headers.get("X-Next-Offset", offset + len(response.content)))
        if not until_end or next_offset == offset:
            return next_offset, response.headers.get("X-Job-Stage", "")
        offset = next_offset


def wait_command(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="A job's id or an array's.")],
    logs: Annotated[bool, typer.Option("--logs", help="Stream the job's log meanwhile.")] = False,
    as_json: AsJson = False,
) -> None:
    """Wait for a job's release, or every task of an array; exit by its outcome (0 only if it, or every
    task, succeeded)."""
    client = session.api()
    if (job := found(client, job_path(job_id))) is not None:
        raise typer.Exit(int(follow(client, job_id, stream_logs=logs, as_json=as_json, first=job)))
    if (array := found(client, array_path(job_id))) is None:
        raise CliError(f"not found: no job or array {job_id} of your teams", Exit.NOT_FOUND)
    if logs:
        raise CliError(f"--logs: {job_id} is an array; each task has its own log (e31 logs TASK_ID)", Exit.USAGE)
    raise typer.Exit(int(follow_array(client, job_id, as_json=as_json, first=array)))


def found(client: Api, path: str) -> dict | None:
    """The job or array at `path`, or None when there is none (an id may be a job's or an array's: both UUIDs)."""
    try:
        return dict(client.json("GET", path))
    except CliError as exc:
        if exc.code != Exit.NOT_FOUND:
            raise
        return None


def logs(
    job_id: JobId,
    follow_log: Annotated[bool, typer.Option("--follow", "-f", help="Keep reading until the job is released.")] = False,
    raw: Annotated[
        bool, typer.Option("--raw", help="The log's bytes as they are, terminal escapes included (for a file).")
    ] = False,
) -> None:
    """Print a job's log (with --follow, as it grows, until the job is released). Control characters
    but line ends and tabs are shown as escapes (\x1b, \r…) unless --raw."""
    client = session.api()
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
