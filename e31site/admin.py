class ReadOnlyAdmin:
    """Admin pages that show rows the domain writes (holds, records) without letting anyone edit them."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
