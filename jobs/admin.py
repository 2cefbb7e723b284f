from django.contrib import admin
from django.db.models import QuerySet
from django.utils import timezone

from core.admin import ProtectedDeleteAdmin, ReadOnlyAdmin
from jobs.lifecycle.actions import cancel
from jobs.models import DataFile, Job, OutputFile, RuntimeImage
from teams.access import SignedInRequest


@admin.register(RuntimeImage)
class RuntimeImageAdmin(ProtectedDeleteAdmin):
    list_display = ["name", "reference", "description", "created_at"]
    list_filter = ["requires_strong_isolation"]
    search_fields = ["name", "reference", "description"]
    protected_by = ("jobs",)


class DataFileInline(ReadOnlyAdmin, admin.TabularInline):
    model = DataFile
    extra = 0


class OutputFileInline(ReadOnlyAdmin, admin.TabularInline):
    model = OutputFile
    extra = 0


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    """Read-only, bar the cancel action: jobs change through the state machine alone."""

    list_display = ["name", "team", "stage", "outcome", "submitted_at", "released_at"]
    list_filter = ["stage", "outcome", "team", "image", "isolation"]
    search_fields = ["name", "=id", "submitted_by__username"]
    list_select_related = ["team"]
    date_hierarchy = "submitted_at"
    inlines = [DataFileInline, OutputFileInline]
    actions = ["cancel_jobs"]

    @admin.action(description="Cancel the selected jobs")
    def cancel_jobs(self, request: SignedInRequest, queryset: QuerySet[Job]) -> None:
        now = timezone.now()
        for job in queryset:
            cancel(job, now=now, acting_user=request.user)
