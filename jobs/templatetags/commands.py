"""A job's command as a shell reads it (`shlex.join`), its scripts (an argument with newlines, as the form's
script box sends: `sh -c SCRIPT`) apart as numbered lines; and the seconds a live clock starts from."""

import shlex
from dataclasses import dataclass
from datetime import datetime

from django import template

register = template.Library()


@dataclass(frozen=True)
class Command:
    """A command to show: `parts` in order, each (a shell-quoted run of arguments, 0) or ("", the number of a
    script shown below it); `scripts`, each a list of its lines; `whole`, the command to paste, scripts included."""

    parts: list[tuple[str, int]]
    scripts: list[list[str]]
    whole: str


@register.filter
def shell(argv: list[str]) -> str:
    """The argv as one line a shell reads back to the same argv."""
    return shlex.join(str(arg) for arg in argv)


@register.filter
def command(argv: list[str]) -> Command:
    """The argv for the page: its arguments shell-quoted, each one with newlines taken apart as a script."""
    args = [str(arg) for arg in argv]
    parts: list[tuple[str, int]] = []
    scripts: list[list[str]] = []
    run: list[str] = []
    for arg in args:
        if "\n" not in arg:
            run.append(arg)
            continue
        if run:
            parts.append((shlex.join(run), 0))
            run = []
        scripts.append(arg.removesuffix("\n").split("\n"))
        parts.append(("", len(scripts)))
    if run:
        parts.append((shlex.join(run), 0))
    return Command(parts=parts, scripts=scripts, whole=shlex.join(args))


@register.filter
def seconds_since(start: datetime | None, now: datetime) -> int:
    """Whole seconds from `start` to `now` (0 before it): where the page's ticking clocks start."""
    return max(0, int((now - start).total_seconds())) if start else 0
