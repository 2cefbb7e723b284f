from django.contrib import admin

from core.admin import ReadOnlyAdmin
from isolation.models import ProbeResult, ProbeRound


class ProbeResultInline(ReadOnlyAdmin, admin.TabularInline):
    model = ProbeResult
    fields = readonly_fields = ("probe", "verdict", "at", "job", "evidence")
    extra = 0


@admin.register(ProbeRound)
class ProbeRoundAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = ["node", "runtime", "trigger", "started_at", "judged_at"]
    list_filter = ["runtime", "trigger", "node"]
    search_fields = ["node__name"]
    inlines = [ProbeResultInline]
