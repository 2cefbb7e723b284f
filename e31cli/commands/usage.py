"""`e31 usage` and `e31 nodes`: what the teams used (as sacct) and the pool's free capacity."""

from typing import Annotated

import typer
from rich.table import Table

from e31cli import session, units
from e31cli.session import AsJson, Since, Until, add_row, out, print_json, print_rows, read_by_server
from e31cli.terminal import visible


def usage(
    since: Since = None,
    until: Until = None,
    group_by: Annotated[str, typer.Option("--group-by", help="day, team or node.")] = "day",
    as_json: AsJson = False,
) -> None:
    """What your teams used: totals by day, team or node, then the per-job records (as sacct)."""
    client = session.api()
    params = {k: v for k, v in {"since": since, "until": until}.items() if v}  # as typed: the server reads them
    with read_by_server(since="--since", until="--until"):
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


def nodes(as_json: AsJson = False) -> None:
    """The pool's nodes and their free capacity."""
    columns = ["NODE", "STATE", "CPUS", "FREE CPUS", "MEMORY MB", "FREE MB", "GPUS", "HEARTBEAT"]
    print_rows(session.api().json("GET", "/pool/nodes/"), as_json, columns, lambda n: (
        n["name"], n["state"], n["cpus"], n["free"]["cpus"], n["memory_mb"], n["free"]["memory_mb"], n["gpus"],
        n["last_heartbeat"] or "",
    ))  # fmt: skip
