from django.contrib import admin, messages
from django.db.models import QuerySet
from django.utils import timezone

from core.admin import ReadOnlyAdmin
from pool.models import Hold, Node, NodeStateChange
from pool.nodes import NodeOffline, set_state
from teams.access import SignedInRequest


class NodeStateChangeInline(ReadOnlyAdmin, admin.TabularInline):
    model = NodeStateChange
    fields = readonly_fields = ("at", "from_state", "to_state", "by", "reason")
    extra = 0


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    inlines = [NodeStateChangeInline]
    list_select_related = ["state_changed_by"]
    list_display = ["name", "state", "cpus", "memory_mb", "gpus", "last_heartbeat", "state_changed_by"]
    list_filter = ["state"]
    readonly_fields = ["registered_at", "last_heartbeat", "state_changed_by", "state_changed_at"]
    actions = ["drain", "resume"]

    @admin.action(description="Drain: no new holds, running jobs finish")
    def drain(self, request: SignedInRequest, queryset: QuerySet[Node]) -> None:
        self._set_state(request, queryset, Node.State.DRAINING)

    @admin.action(description="Resume: accept new holds")
    def resume(self, request: SignedInRequest, queryset: QuerySet[Node]) -> None:
        self._set_state(request, queryset, Node.State.ACTIVE)

    def _set_state(self, request: SignedInRequest, queryset: QuerySet[Node], state: str) -> None:
        for node in queryset:
            try:
                set_state(node, state, now=timezone.now(), acting_user=request.user)
            except NodeOffline as exc:
                self.message_user(request, str(exc), level=messages.WARNING)


@admin.register(Hold)
class HoldAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = ["job", "node", "cpu_set", "memory_mb", "gpu_ids", "held_at", "released_at"]
    list_filter = ["node"]
    list_select_related = ["job", "node"]
