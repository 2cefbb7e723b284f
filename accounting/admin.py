from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from accounting.ledger import Head, last_head
from accounting.models import Ledger, Record
from core.admin import ReadOnlyAdmin


@admin.register(Record)
class RecordAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    # Six narrow columns, the cost among them: the list fits a laptop screen without scrolling sideways.
    # The rest of a record (cores, memory, cpu time, the hash) is on its page.
    list_display = ["sequence", "job_name", "team", "outcome", "held_seconds", "cost"]
    list_filter = ["outcome", "team", "node", "released_at"]
    search_fields = ["job__name", "=job__id", "node", "=hash"]
    list_select_related = ["job", "team"]

    @admin.display(description="job", ordering="job__name")
    def job_name(self, record: Record) -> str:
        return record.job.name

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        """The list, under the database's head beside the last head of this machine's heads file, so an
        operator can compare them (`manage.py verify_ledger` checks the whole chain)."""
        ledger = Ledger.objects.filter(pk=1).first()
        database = Head(ledger.last_sequence, ledger.last_hash) if ledger else None
        witnessed = last_head()
        behind = (witnessed.head.sequence - database.sequence) if database and witnessed.head else 0
        context = {
            "ledger_database_head": database,
            "ledger_heads_file": witnessed,
            "ledger_heads_differ": bool(
                database
                and witnessed.head
                and witnessed.head.sequence == database.sequence
                and witnessed.head.hash != database.hash
            ),
            "ledger_records_removed": max(behind, 0),
        }
        return super().changelist_view(request, {**context, **(extra_context or {})})
