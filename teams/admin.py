from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin
from django.contrib.auth.models import Group

from core.admin import ChangeNothingAdmin, ProtectedDeleteAdmin
from teams.models import ApiToken, Membership, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(ProtectedDeleteAdmin):
    list_display = ["slug", "name"]
    list_filter = ["requires_strong_isolation"]
    protected_by = ("jobs", "records")
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "joined_at"]
    list_filter = ["team"]
    search_fields = ["user__username", "team__slug"]
    list_select_related = ["user", "team"]


@admin.register(ApiToken)
class ApiTokenAdmin(ChangeNothingAdmin, admin.ModelAdmin):
    """Tokens by their prefix, as only a digest of each key is kept: delete one to revoke it."""

    list_display = ["prefix", "name", "user", "created_at"]
    list_filter = ["user"]
    search_fields = ["user__username", "prefix"]
    list_select_related = ["user"]
    readonly_fields = ["user", "name", "prefix", "created_at"]
    exclude = ["digest"]


# Teams, not groups, grant things here, but the admin lists groups: with a filter, as every list has one.
admin.site.unregister(Group)


@admin.register(Group)
class FilteredGroupAdmin(GroupAdmin):
    list_filter = ["permissions__content_type__app_label"]
