"""What every command shares: the consoles, the API client of the configured server and token, every
failure turned into one line on stderr and its exit code (e31cli.exits), and the ways data is printed."""

import functools
import io
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar
from urllib.parse import quote

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn
from rich.table import Table
from rich.text import Text

from e31cli.client import Api
from e31cli.config import load
from e31cli.exits import CliError, Exit
from e31cli.terminal import json_visible, visible

# Markup and emoji codes off: what is printed is data (a job named `[/x]` or `:bomb:` is shown as it is).
out = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)

P = ParamSpec("P")
R = TypeVar("R")
POLL_S = 1.0
MAX_POLL_S = 5.0
RELEASE = "release"

JobId = Annotated[str, typer.Argument(metavar="ID")]
AsJson = Annotated[bool, typer.Option("--json")]
# Sent as typed: the server reads a moment or a duration back from now.
Since = Annotated[str | None, typer.Option("--since", help="An ISO date or date-time, or 24h, 7d…")]
Until = Annotated[str | None, typer.Option("--until")]


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


def api(*, need_token: bool = True) -> Api:
    """Called as `session.api()`, which tests replace."""
    return Api(load(need_token=need_token))


def poll(
    client: Api,
    path: str,
    line: Callable[[dict], str],
    *,
    live: bool,
    first: dict | None = None,
    each: Callable[[dict], object] = lambda body: None,
) -> dict:
    """Read a job or an array until its release (`first`: its answer just read), its line on a spinner (`live`) or
    once a stage in a log; read again sooner after a change. `each` is called with every answer."""
    stage, last, delay = "", None, POLL_S
    with err.status("", spinner="dots") if live else nullcontext() as status:
        while True:
            body, first = first or client.json("GET", path), None
            shown = visible(line(body))
            if status is not None:
                status.update(Text(shown))  # a str would be read as markup by the spinner
            elif body["stage"] != stage:  # a line per stage in a log, not one per task
                err.print(shown)
            moved = body.get("counts", body["stage"]) != last  # an array moves as its counts change
            stage, last = body["stage"], body.get("counts", body["stage"])
            each(body)
            if stage == RELEASE:
                return body
            delay = POLL_S if moved else min(delay * 1.5, MAX_POLL_S)
            time.sleep(delay)


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
    if as_json:
        print_json(rows)
        return
    table = Table(*columns, box=None)
    for row in rows:
        add_row(table, *cells(row))
    out.print(table)


def print_pairs(rows: list[tuple[str, object]]) -> None:
    table = Table(box=None, show_header=False)
    for label, value in rows:
        add_row(table, label, value)
    out.print(table)


def job_path(job_id: str) -> str:
    return f"/jobs/{quote(job_id, safe='')}/"


def array_path(array_id: str) -> str:
    return f"/arrays/{quote(array_id, safe='')}/"


class ProgressFile(io.FileIO):
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


@contextmanager
def read_by_server(**options: str) -> Iterator[None]:
    """The server's refusal of a value sent as typed (`since="--since"`: the field, its option) is a usage error
    naming the option, as a value read here would be."""
    try:
        yield
    except CliError as exc:
        named = [field for field in exc.refused if field in options]
        if exc.code != Exit.REFUSED or not named:
            raise
        raise CliError(f"{options[named[0]]}: {exc.refused[named[0]]}", Exit.USAGE) from None
