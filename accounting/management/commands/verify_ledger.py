from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounting.verification import verify_and_keep


class Command(BaseCommand):
    help = (
        "Check the whole accounting ledger: each record's keyed hash, the chain, no gap, and its head against the "
        "ledger row and this machine's heads file. Names the first bad record and exits 1; warnings go to stderr."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--heads-file",
            action="append",
            type=Path,
            dest="heads_files",
            metavar="PATH",
            help="a heads file to check the head against, instead of this machine's (repeatable: one copied "
            "from each machine that writes records)",
        )

    def handle(self, *args: Any, heads_files: list[Path] | None = None, **options: Any) -> None:
        check = verify_and_keep(heads_files=heads_files)
        for warning in check.warnings:
            self.stderr.write(f"warning: {warning}")
        if not check:
            raise CommandError(f"the accounting ledger does not verify: {check.problem}")
        witnessed = "; ".join(f"heads file {w.path}: {w.head or 'empty'}" for w in check.witnessed)
        self.stdout.write(f"ok: {check.records} records, keyed hash chain intact, head {check.head}; {witnessed}")
