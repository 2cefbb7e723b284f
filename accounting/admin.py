from django.contrib import admin

from accounting.models import Record


@admin.register(Record)
class RecordAdmin(admin.ModelAdmin):
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

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
