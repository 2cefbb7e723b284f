"""A job's command as a shell reads it, its scripts (an argument with newlines, or the one after `-c`) apart as
numbered lines; and the seconds a live clock starts from."""

import re
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


# What a shell still reads inside double quotes: an argument holding none of these may be written "as it is".
EXPANDED_IN_DOUBLE_QUOTES = set('"$`\\!')


def quote(arg: str) -> str:
    """One argument as a shell reads it back: `shlex.quote`, but an argument with a single quote in it (and nothing
    a shell expands inside double quotes) in double quotes, as a person writes it, rather than `'it'"'"'s'`."""
    if "'" in arg and not EXPANDED_IN_DOUBLE_QUOTES & set(arg):
        return f'"{arg}"'
    return shlex.quote(arg)


def join(args: list[str]) -> str:
    return " ".join(quote(arg) for arg in args)


@register.filter
def shell(argv: list[str]) -> str:
    """The argv as one line a shell reads back to the same argv."""
    return join([str(arg) for arg in argv])


# Interpreters whose `-c` takes a script (gcc's, git's and tar's do not).
SCRIPT_RUNNERS = re.compile(r"(?:.*/)?(?:sh|bash|dash|ash|zsh|python[0-9.]*|perl|ruby|node)")


def _script_after_c(args: list[str], n: int) -> bool:
    """Whether args[n] is the script an interpreter's `-c` takes: `sh -c '…'`, `python3 -c '…'`."""
    return n >= 2 and args[n - 1] == "-c" and SCRIPT_RUNNERS.fullmatch(args[n - 2]) is not None


@register.filter
def command(argv: list[str]) -> Command:
    """The argv for the page: its arguments shell-quoted, each script (an argument with newlines, or the one after
    `-c`) taken apart as numbered lines: a one-line script shell-quoted would read `'"'"'` for each quote in it."""
    args = [str(arg) for arg in argv]
    parts: list[tuple[str, int]] = []
    scripts: list[list[str]] = []
    run: list[str] = []
    for n, arg in enumerate(args):
        if "\n" not in arg and not _script_after_c(args, n):
            run.append(arg)
            continue
        if run:
            parts.append((join(run), 0))
            run = []
        scripts.append(arg.removesuffix("\n").split("\n"))
        parts.append(("", len(scripts)))
    if run:
        parts.append((join(run), 0))
    return Command(parts=parts, scripts=scripts, whole=join(args))


@register.filter
def seconds_since(start: datetime | None, now: datetime) -> int:
    """Whole seconds from `start` to `now` (0 before it): where the page's ticking clocks start."""
    return max(0, int((now - start).total_seconds())) if start else 0
