from django.contrib import admin

from accounting.models import Record
from core.admin import ReadOnlyAdmin


@admin.register(Record)
class RecordAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = [
        "sequence",
        "job",
        "team",
        "node",
        "cpus",
        "memory_mb",
        "held_seconds",
        "cpu_seconds",
        "cost",
        "outcome",
    ]
    list_filter = ["team", "node", "outcome"]
    list_select_related = ["job", "team"]
