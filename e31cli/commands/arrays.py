"""`e31 array`: an array's counts or its tasks; and an array followed until every task is released."""

from typing import Annotated

import typer

from e31cli import session
from e31cli.client import Api
from e31cli.exits import Exit
from e31cli.session import AsJson, array_path, err, poll, print_json, print_pairs, print_rows, say

# The order counts are shown in: a task's way through the stages, then the outcomes, failures last.
COUNTED = ["submit", "rent", "run", "output", "succeeded", "cancelled", "rejected", "preempted", "node_lost",
           "timed_out", "out_of_memory", "failed"]  # fmt: skip


def counted(counts: dict[str, int]) -> list[tuple[str, int]]:
    """An array's counts in a steady order (names the CLI does not know yet last), those of no task left out."""
    known = [(name, counts[name]) for name in COUNTED if counts.get(name)]
    return known + sorted((name, n) for name, n in counts.items() if n and name not in COUNTED)


def counts_text(array: dict) -> str:
    return ", ".join(f"{n} {name}" for name, n in counted(array.get("counts") or {})) or "no tasks"


def array_line(array: dict) -> str:
    return f"array {array['id']}: {array['stage']} ({counts_text(array)})"


def array_exit(array: dict) -> Exit:
    """0 only when every task succeeded; otherwise the code of a failed job, whatever the tasks' outcomes."""
    return Exit.SUCCEEDED if [name for name, _ in counted(array["counts"])] == ["succeeded"] else Exit.FAILED


def follow_array(client: Api, array_id: str, *, as_json: bool = False, first: dict | None = None) -> Exit:
    array = poll(client, array_path(array_id), array_line, live=err.is_terminal, first=first)
    if as_json:
        print_json(array)
    say(err, f"array {array_id}: {counts_text(array)}")
    code = array_exit(array)
    if code != Exit.SUCCEEDED:
        say(err, f"its tasks: e31 array {array_id} --tasks [--outcome failed]")
    return code


def array_command(
    array_id: Annotated[str, typer.Argument(metavar="ID")],
    tasks: Annotated[bool, typer.Option("--tasks", help="List its tasks, in index order.")] = False,
    outcome: Annotated[str | None, typer.Option("--outcome", help="With --tasks: only those of this outcome.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="With --tasks: at most this many.")] = 100,
    as_json: AsJson = False,
) -> None:
    """An array: its size, stage and how many tasks are at each stage or outcome (with --tasks, the tasks)."""
    client = session.api()
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
    print_pairs(rows)
