from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest


class ChangeNothingAdmin:
    """Admin pages of rows their own code writes (a node's registration, a token's key): none added or edited here."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyAdmin(ChangeNothingAdmin):
    """Admin pages of rows the domain writes and keeps (holds, records): none deleted here either."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ProtectedDeleteAdmin(admin.ModelAdmin):
    """Deletes offered only where they can succeed: a row others PROTECT gets a 403, not a database error."""

    protected_by: tuple[str, ...] = ()  # the related names of the rows that protect this one

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        if obj is not None and any(getattr(obj, name).exists() for name in self.protected_by):
            return False
        return super().has_delete_permission(request, obj)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions
