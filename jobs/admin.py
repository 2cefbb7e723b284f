from django.contrib import admin
from django.db.models import QuerySet
from django.utils import timezone

from jobs.actions import cancel
from jobs.models import DataFile, Job, OutputFile, RuntimeImage
from teams.access import SignedInRequest


@admin.register(RuntimeImage)
class RuntimeImageAdmin(admin.ModelAdmin):
    list_display = ["name", "reference", "description", "created_at"]
    search_fields = ["name", "reference"]


class DataFileInline(admin.TabularInline):
    model = DataFile
    extra = 0
    can_delete = False
    readonly_fields = ["name", "size", "sha256"]


class OutputFileInline(admin.TabularInline):
    model = OutputFile
    extra = 0
    can_delete = False
    readonly_fields = ["path", "size", "sha256"]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "stage", "outcome", "cpus", "memory_mb", "submitted_at", "released_at"]
    list_filter = ["stage", "outcome", "team"]
    search_fields = ["name", "id"]
    list_select_related = ["team"]
    date_hierarchy = "submitted_at"
    inlines = [DataFileInline, OutputFileInline]
    # The state machine decides stages: the admin shows them, it does not edit them.
    readonly_fields = [
        "id", "team", "submitted_by", "image", "command", "env", "cpus", "memory_mb", "gpus", "time_limit_s",
        "output_patterns", "idempotency_key", "stage", "outcome", "exit_code", "reason", "cancel_requested",
        "cancelled_by", "queue_position", "wait_reason", "expected_start",
        "submitted_at", "held_at", "started_at", "finished_at", "released_at",
    ]  # fmt: skip
    actions = ["cancel_jobs"]

    @admin.action(description="Cancel the selected jobs")
    def cancel_jobs(self, request: SignedInRequest, queryset: QuerySet[Job]) -> None:
        now = timezone.now()
        for job in queryset:
            cancel(job, now=now, acting_user=request.user)
