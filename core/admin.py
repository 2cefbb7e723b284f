"""Admin helpers every app may use."""

from typing import Any

from django.http import HttpRequest


class ReadOnlyAdmin:
    """Admin pages that show rows the domain writes (holds, records) without letting anyone edit them."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
