"""The `e31` command line: each command of e31cli.commands, put in its place; each ends with an exit code of
e31cli.exits and, on an error, one line on stderr (e31cli.session.handled)."""

from collections.abc import Callable
from typing import Any

import typer

from e31cli.commands import account, arrays, follow, jobs, outputs, schedules, usage
from e31cli.session import handled

app = typer.Typer(
    name="e31",
    help="Submit and follow batch jobs on an E31 Network pool (configure with E31_URL and E31_TOKEN, or `e31 login`).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
schedule_app = typer.Typer(help="Schedules: a job or template submitted at each time a cron line names.")
tokens_app = typer.Typer(help="Your API tokens: make, list, revoke (the Account page does the same).")


def add(on: typer.Typer, name: str, command: Callable[..., Any], **settings: Any) -> None:
    """`command` as `name` of `on` (the app, or a group of it), its failures reported by `handled`."""
    on.command(name, **settings)(handled(command))


# In the order `e31 --help` lists them.
add(app, "submit", jobs.submit, context_settings={"allow_interspersed_args": False})
add(app, "wait", follow.wait_command)
add(app, "array", arrays.array_command)
add(app, "logs", follow.logs)
add(app, "cancel", jobs.cancel)
add(app, "list", jobs.list_jobs)
add(app, "show", jobs.show)
add(app, "outputs", outputs.outputs)
add(app, "usage", usage.usage)
add(app, "nodes", usage.nodes)
add(app, "login", account.login)
add(app, "config", account.config)

app.add_typer(schedule_app, name="schedule")
add(schedule_app, "create", schedules.schedule_create)
add(schedule_app, "list", schedules.schedule_list)
add(schedule_app, "pause", schedules.schedule_pause)
add(schedule_app, "resume", schedules.schedule_resume)
add(schedule_app, "delete", schedules.schedule_delete)
add(schedule_app, "runs", schedules.schedule_runs)

app.add_typer(tokens_app, name="tokens")
add(tokens_app, "list", account.tokens_list)
add(tokens_app, "create", account.tokens_create)
add(tokens_app, "revoke", account.tokens_revoke)
