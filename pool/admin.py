from django.contrib import admin

from e31site.admin import ReadOnlyAdmin
from pool.models import Hold, Node


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "state", "cpus", "memory_mb", "gpus", "last_heartbeat"]
    list_filter = ["state"]
    readonly_fields = ["registered_at", "last_heartbeat"]
    actions = ["drain", "resume"]

    @admin.action(description="Drain: no new holds, running jobs finish")
    def drain(self, request, queryset):
        queryset.exclude(state=Node.State.OFFLINE).update(state=Node.State.DRAINING)

    @admin.action(description="Resume: accept new holds")
    def resume(self, request, queryset):
        # An offline node comes back when its worker registers again (pool.nodes.set_state).
        queryset.exclude(state=Node.State.OFFLINE).update(state=Node.State.ACTIVE)


@admin.register(Hold)
class HoldAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = ["job", "node", "cpu_set", "memory_mb", "gpu_ids", "held_at", "released_at"]
    list_filter = ["node"]
    list_select_related = ["job", "node"]
