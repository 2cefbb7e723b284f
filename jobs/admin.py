from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from core.admin import ProtectedDeleteAdmin, ReadOnlyAdmin
from jobs.lifecycle.actions import cancel
from jobs.models import DataFile, Job, OutputFile, RuntimeImage
from jobs.web.upstreams import named_text
from teams.access import SignedInRequest

# A reason names the jobs and arrays it is about by id (the API and the CLI read it so): here, by their names.
NAMED_REASONS = {"reason": "reason_named", "wait_reason": "wait_reason_named"}


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
    readonly_fields = list(NAMED_REASONS.values())

    def get_fields(self, request: HttpRequest, obj: Job | None = None) -> list[Any]:
        fields = [name for name in super().get_fields(request, obj) if name not in NAMED_REASONS.values()]
        return [NAMED_REASONS.get(name, name) if isinstance(name, str) else name for name in fields]

    @admin.display(description="reason")
    def reason_named(self, job: Job) -> str:
        return named_text(job.reason, job)

    @admin.display(description="wait reason")
    def wait_reason_named(self, job: Job) -> str:
        return named_text(job.wait_reason, job)

    @admin.action(description="Cancel the selected jobs")
    def cancel_jobs(self, request: SignedInRequest, queryset: QuerySet[Job]) -> None:
        now = timezone.now()
        for job in queryset:
            cancel(job, now=now, acting_user=request.user)
