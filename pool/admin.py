from django.contrib import admin, messages
from django.db.models import QuerySet
from django.utils import timezone

from core.admin import ChangeNothingAdmin, ProtectedDeleteAdmin, ReadOnlyAdmin
from pool.models import Hold, Node, NodeStateChange
from pool.nodes import NodeOffline, set_state
from teams.access import SignedInRequest


class NodeStateChangeInline(ReadOnlyAdmin, admin.TabularInline):
    model = NodeStateChange
    fields = readonly_fields = ("at", "from_state", "to_state", "by", "reason")
    extra = 0


@admin.register(Node)
class NodeAdmin(ChangeNothingAdmin, ProtectedDeleteAdmin):
    """Nodes as their workers registered them: their state changes only by drain and resume, which record who."""

    inlines = [NodeStateChangeInline]
    list_select_related = ["state_changed_by"]
    list_display = ["name", "state", "state_reason", "cpus", "memory_mb", "gpus", "last_heartbeat", "state_changed_by"]
    list_filter = ["state"]
    search_fields = ["name"]
    actions = ["drain", "resume"]
    protected_by = ("holds",)

    @admin.action(description="Drain: no new holds, running jobs finish")
    def drain(self, request: SignedInRequest, queryset: QuerySet[Node]) -> None:
        self._set_state(request, queryset, Node.State.DRAINING, "drained in the admin (no reason asked there)")

    @admin.action(description="Resume: accept new holds")
    def resume(self, request: SignedInRequest, queryset: QuerySet[Node]) -> None:
        self._set_state(request, queryset, Node.State.ACTIVE, "resumed in the admin")

    def _set_state(self, request: SignedInRequest, queryset: QuerySet[Node], state: str, reason: str) -> None:
        for node in queryset:
            try:
                set_state(node, state, now=timezone.now(), acting_user=request.user, reason=reason)
            except NodeOffline as exc:
                self.message_user(request, str(exc), level=messages.WARNING)


@admin.register(Hold)
class HoldAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = ["job_name", "node", "cpu_set", "memory_mb", "held_at", "released_at"]
    list_filter = ["node", ("released_at", admin.EmptyFieldListFilter), "runtime"]
    search_fields = ["job__name", "=job__id", "node__name"]
    list_select_related = ["job", "node"]

    @admin.display(description="job", ordering="job__name")
    def job_name(self, hold: Hold) -> str:
        return hold.job.name
