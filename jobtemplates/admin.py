from typing import Any

from django.contrib import admin
from django.contrib.auth.models import User
from django.http import HttpRequest

from jobtemplates.models import JobTemplate


@admin.register(JobTemplate)
class JobTemplateAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "image", "cpus", "memory_mb", "created_by"]
    list_filter = ["team", "image"]
    search_fields = ["name", "description", "command"]
    list_select_related = ["team", "image", "created_by"]
    readonly_fields = ["created_by", "created_at"]
    fieldsets = [
        (None, {"fields": ["name", "description", "team"]}),
        ("The work", {"fields": ["image", "command", "defaults", "env", "output_patterns"]}),
        ("The request: defaults and bounds", {"fields": [("cpus", "cpus_max"), ("memory_mb", "memory_mb_max"),
                                                         ("gpus", "gpus_max"), ("time_limit_s", "time_limit_s_max")]}),
        (None, {"fields": ["created_by", "created_at"]}),
    ]  # fmt: skip

    def save_model(self, request: HttpRequest, obj: JobTemplate, form: Any, change: bool) -> None:
        if not change and isinstance(request.user, User):
            obj.created_by = request.user
        super().save_model(request, obj, form, change)
