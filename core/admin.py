from typing import Any

from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import User
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


def acting_user(request: HttpRequest) -> User | None:
    return request.user if isinstance(request.user, User) else None


def joined(row: Model) -> str:
    """A row of a many-to-many table Django made, by the rows it joins: "urgent – red"."""
    return " – ".join(str(getattr(row, f.name)) for f in row._meta.get_fields() if f.many_to_one)


# A delete's confirmation lists the rows of those tables that go with the object, by their __str__: Django's own
# says "Queue_teams object (1)", which tells an operator nothing of what is unlinked.
for _model in apps.get_models(include_auto_created=True):
    if _model._meta.auto_created:
        _model.__str__ = joined  # type: ignore[method-assign,assignment]
