from django.contrib import admin

from core.admin import ProtectedDeleteAdmin
from teams.models import Membership, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(ProtectedDeleteAdmin):
    list_display = ["slug", "name"]
    protected_by = ("jobs", "records")
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "joined_at"]
    list_filter = ["team"]
