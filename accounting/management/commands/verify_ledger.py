from typing import Any

from django.core.management.base import BaseCommand, CommandError

from accounting.meter import verify_ledger
from accounting.models import Record


class Command(BaseCommand):
    help = "Check that no accounting record was changed, removed or cut off the end (exit 1 if one was)."

    def handle(self, *args: Any, **options: Any) -> None:
        if not verify_ledger():
            raise CommandError("the accounting ledger does not verify: a record was changed or removed")
        self.stdout.write(f"ok: {Record.objects.count()} records, hash chain and ledger intact")
