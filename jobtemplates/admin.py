from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from core.admin import acting_user
from jobtemplates import files
from jobtemplates.models import JobTemplate, TemplateFile
from jobtemplates.signals import template_changed


class TemplateFileInline(admin.TabularInline):
    """Shown, not changed here: the template's page attaches and removes files, and frees their bytes."""

    model = TemplateFile
    fields = ["name", "blob", "added_at"]
    readonly_fields = ["name", "blob", "added_at"]
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(JobTemplate)
class JobTemplateAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "image", "cpus", "memory_mb", "created_by"]
    list_filter = ["team", "image"]
    search_fields = ["name", "description", "command"]
    list_select_related = ["team", "image", "created_by"]
    readonly_fields = ["created_by", "created_at"]
    inlines = [TemplateFileInline]
    fieldsets = [
        (None, {"fields": ["name", "description", "team"]}),
        ("The work", {"fields": ["image", "command", "defaults", "env", "output_patterns"]}),
        ("The request: defaults and bounds", {"fields": [("cpus", "cpus_max"), ("memory_mb", "memory_mb_max"),
                                                         ("gpus", "gpus_max"), ("time_limit_s", "time_limit_s_max")]}),
        ("An array and retries: presets of a run", {"fields": [("array_indices", "max_running"), "max_retries",
                                                               "retry_on", ("retry_memory_factor", "retry_delay_s")]}),
        (None, {"fields": ["created_by", "created_at"]}),
    ]  # fmt: skip

    def save_model(self, request: HttpRequest, obj: JobTemplate, form: Any, change: bool) -> None:
        by = acting_user(request)
        if not change:
            obj.created_by = by
        else:  # the schedules that run it hear who changed what (schedules.changes)
            saved = JobTemplate.objects.select_related("image", "team").get(pk=obj.pk)
            values = {name: [_json(getattr(saved, name)), _json(getattr(obj, name))] for name in form.changed_data}
            changes = {name: [before, after] for name, (before, after) in values.items() if before != after}
            if changes:
                template_changed.send(sender=JobTemplate, template=obj, by=by, at=timezone.now(), changes=changes)
        super().save_model(request, obj, form, change)
        if missing := obj.missing_data():
            paths = ", ".join(f"/data/{name}" for name in missing)
            self.message_user(
                request,
                f"The command names {paths}, which the template has no file of: a run fails without it. "
                "Attach it on the template's page.",
                messages.WARNING,
            )

    def delete_model(self, request: HttpRequest, obj: JobTemplate) -> None:
        # So its files' bytes leave the store once nothing names them, and its schedules hear of it.
        files.delete_template(obj, by=acting_user(request), now=timezone.now())

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[JobTemplate]) -> None:
        for template in queryset:
            files.delete_template(template, by=acting_user(request), now=timezone.now())


def _json(value: Any) -> Any:
    """As an event keeps it: JSON as it is, a related object (the image, the team) by its name."""
    if value is None or isinstance(value, str | int | float | bool | list | dict):
        return value
    return str(value)
