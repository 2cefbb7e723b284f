from typing import Any

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin
from django.contrib.auth.models import Group
from django.db.models import Model, QuerySet
from django.forms import BaseInlineFormSet, ModelForm
from django.http import HttpRequest

from core.admin import ChangeNothingAdmin, ProtectedDeleteAdmin
from teams.access import zones_changed
from teams.models import ApiToken, Membership, Team


class ChangesZonesAdmin(admin.ModelAdmin):
    """Teams and memberships decide each person's zone: a change here is on every member's next page."""

    zone_fields: frozenset[str] | None = None  # the fields that decide a zone; None: any

    def save_model(self, request: HttpRequest, obj: Any, form: ModelForm, change: bool) -> None:
        super().save_model(request, obj, form, change)
        changed = set(form.changed_data)
        if changed if self.zone_fields is None else changed & self.zone_fields:
            zones_changed()

    def save_formset(self, request: HttpRequest, form: ModelForm, formset: BaseInlineFormSet, change: bool) -> None:
        super().save_formset(request, form, formset, change)
        if formset.has_changed():  # members joined or left
            zones_changed()

    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        super().delete_model(request, obj)
        zones_changed()

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        super().delete_queryset(request, queryset)
        zones_changed()


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(ChangesZonesAdmin, ProtectedDeleteAdmin):
    list_display = ["slug", "name"]
    list_filter = ["requires_strong_isolation"]
    protected_by = ("jobs", "records")
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]
    zone_fields = frozenset({"time_zone", "slug"})  # a person's first team, by slug, gives their zone


@admin.register(Membership)
class MembershipAdmin(ChangesZonesAdmin):
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
