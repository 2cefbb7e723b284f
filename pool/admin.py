from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db.models import QuerySet
from django.forms import BaseInlineFormSet, ModelForm
from django.forms.formsets import BaseFormSet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html_join

from core.admin import ProtectedDeleteAdmin, ReadOnlyAdmin, acting_user
from core.bounds import column_form_field
from pool.features import BadConstraint, parse_features
from pool.models import Hold, MaintenanceWindow, Node, NodeStateChange, Queue, TeamQueue
from pool.nodes import NodeOffline, set_features, set_state
from pool.queues import preemption_words
from teams.access import SignedInRequest

FEATURE_CHANGES_SHOWN = 20


class NodeStateChangeInline(ReadOnlyAdmin, admin.TabularInline):
    model = NodeStateChange
    fields = readonly_fields = ("at", "from_state", "to_state", "by", "reason")
    extra = 0


class NodeFeaturesForm(forms.ModelForm):
    """A node's features as the comma-separated text E31_NODE_FEATURES takes."""

    features = forms.CharField(
        required=False,
        help_text="Comma-separated, e.g. bigmem, nvme, gpu-h100: what a job's constraint asks for. "
        "A worker started with E31_NODE_FEATURES replaces them when it registers.",
    )

    class Meta:
        model = Node
        fields = ["features"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initial["features"] = ", ".join(self.instance.features)

    def clean_features(self) -> list[str]:
        try:
            return parse_features(self.cleaned_data["features"])
        except BadConstraint as exc:
            raise forms.ValidationError(str(exc)) from None


@admin.register(Node)
class NodeAdmin(ProtectedDeleteAdmin):
    """Nodes as their workers registered them: their state changes only by drain and resume, which record who;
    operators edit only their features, each change logged with who made it (shown on the node's page here)."""

    form = NodeFeaturesForm
    fields = ["name", "state", "state_reason", "cpu_ids", "memory_mb", "gpu_ids", "features", "feature_changes",
              "registered_at", "last_heartbeat"]  # fmt: skip
    readonly_fields = ["name", "state", "state_reason", "cpu_ids", "memory_mb", "gpu_ids", "feature_changes",
                       "registered_at", "last_heartbeat"]  # fmt: skip
    inlines = [NodeStateChangeInline]
    list_select_related = ["state_changed_by"]
    list_display = ["name", "state", "state_reason", "cpus", "memory_mb", "gpus", "features_shown", "last_heartbeat",
                    "state_changed_by"]  # fmt: skip
    list_filter = ["state"]
    search_fields = ["name"]
    actions = ["drain", "resume"]
    protected_by = ("holds",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # nodes join the pool by their workers' registration only

    @admin.display(description="features")
    def features_shown(self, node: Node) -> str:
        return ", ".join(node.features)

    @admin.display(description="changes of its features")
    def feature_changes(self, node: Node) -> str:
        entries = logged_feature_changes(node)[:FEATURE_CHANGES_SHOWN]
        if not entries:
            return "none made in the admin"
        rows = ((f"{e.action_time:%Y-%m-%d %H:%M}", e.user, e.get_change_message()) for e in entries)
        return format_html_join("\n", "<div>{} by {}: {}</div>", rows)

    def save_model(self, request: HttpRequest, obj: Node, form: forms.ModelForm, change: bool) -> None:
        set_features(obj, form.cleaned_data["features"])

    def construct_change_message(
        self, request: HttpRequest, form: forms.Form, formsets: Iterable[BaseFormSet] | None, add: bool = False
    ) -> list[dict[str, dict[str, list[str]]]]:
        """Logged as "Changed features: bigmem → bigmem, nvme.", so the log says what they were and became."""
        if "features" not in form.changed_data:
            return []
        before = ", ".join(parse_features(form.initial["features"])) or "none"
        after = ", ".join(form.cleaned_data["features"]) or "none"
        return [{"changed": {"fields": [f"features: {before} → {after}"]}}]

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


def logged_feature_changes(node: Node) -> QuerySet[LogEntry]:
    """The admin's log of the node's feature changes (the only change it makes to a node), newest first."""
    entries = LogEntry.objects.filter(
        content_type=ContentType.objects.get_for_model(Node), object_id=str(node.pk), action_flag=CHANGE
    )
    return entries.exclude(change_message__in=["", "[]"]).select_related("user").order_by("-action_time", "-pk")


@admin.register(Hold)
class HoldAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = ["job_name", "node", "cpu_set", "memory_mb", "held_at", "released_at"]
    list_filter = ["node", ("released_at", admin.EmptyFieldListFilter), "runtime"]
    search_fields = ["job__name", "=job__id", "node__name"]
    list_select_related = ["job", "node"]

    @admin.display(description="job", ordering="job__name")
    def job_name(self, hold: Hold) -> str:
        return hold.job.name


# A new window may start this long ago: the admin's "Now" is a moment behind the save.
NOW_SLACK = timedelta(minutes=1)


class MaintenanceWindowForm(forms.ModelForm):
    class Meta:
        model = MaintenanceWindow
        fields = ["starts_at", "ends_at", "reason", "nodes"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        starts_at, ends_at = cleaned.get("starts_at"), cleaned.get("ends_at")
        if starts_at is not None and ends_at is not None and ends_at <= starts_at:
            self.add_error("ends_at", "A window ends after it starts.")
        if self.instance.pk is None and starts_at is not None and starts_at < timezone.now() - NOW_SLACK:
            self.add_error("starts_at", "A new window cannot start in the past.")
        return cleaned


@admin.register(MaintenanceWindow)
class MaintenanceWindowAdmin(admin.ModelAdmin):
    """A window over is history; one under way is shortened (its end set to now), not deleted, so its nodes resume."""

    form = MaintenanceWindowForm
    list_display = ["starts_at", "ends_at", "reason", "on_nodes", "created_by"]
    list_filter = ["starts_at", "nodes"]
    list_select_related = ["created_by"]
    readonly_fields = ["created_by", "created_at", "drained_at", "resumed_at"]
    filter_horizontal = ["nodes"]
    search_fields = ["reason"]
    actions = None

    def get_queryset(self, request: HttpRequest) -> QuerySet[MaintenanceWindow]:
        return super().get_queryset(request).prefetch_related("nodes")

    @admin.display(description="nodes")
    def on_nodes(self, window: MaintenanceWindow) -> str:
        return ", ".join(sorted(n.name for n in window.nodes.all())) or "all"

    def has_change_permission(self, request: HttpRequest, obj: MaintenanceWindow | None = None) -> bool:
        return super().has_change_permission(request, obj) and (obj is None or obj.resumed_at is None)

    def has_delete_permission(self, request: HttpRequest, obj: MaintenanceWindow | None = None) -> bool:
        under_way = obj is not None and obj.drained_at is not None and obj.resumed_at is None
        return super().has_delete_permission(request, obj) and not under_way

    def save_model(self, request: HttpRequest, obj: MaintenanceWindow, form: Any, change: bool) -> None:
        if not change:
            obj.created_at = timezone.now()
            obj.created_by = acting_user(request)
        super().save_model(request, obj, form, change)


class TeamQueueInline(admin.TabularInline):
    model = TeamQueue
    fields = ["team"]
    autocomplete_fields = ["team"]
    extra = 0
    verbose_name = "team whose default it is"
    verbose_name_plural = "teams whose default it is (their jobs naming no queue wait here)"


class QueueForm(forms.ModelForm):
    # As the ModelForm would make them, bounded by their columns (core.bounds).
    priority, max_running_cores_per_team, max_running_jobs_per_team = (
        column_form_field(Queue, name)
        for name in ("priority", "max_running_cores_per_team", "max_running_jobs_per_team")
    )

    class Meta:
        model = Queue
        fields = [
            "name", "description", "priority", "teams", "max_running_cores_per_team", "max_running_jobs_per_team",
            "preempts_lower", "preemptable", "opt_out_allowed", "is_default",
        ]  # fmt: skip
        help_texts = {
            "preempts_lower": "its jobs that cannot be held take the cores of preemptable jobs of lower queues; "
            "only the teams chosen above may then use it",
        }

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        # Else every team could send its work there and stop every other team's jobs.
        if cleaned.get("preempts_lower") and "teams" in cleaned and not cleaned["teams"]:
            self.add_error(
                "teams", 'A queue that preempts lower queues names the teams that may use it: choose at least one, '
                'or untick "Preempts lower".'
            )  # fmt: skip
        return cleaned


@admin.register(Queue)
class QueueAdmin(ProtectedDeleteAdmin):
    """Each save records who changed the queue beside the admin log; a preempting queue left with no teams
    preempts nobody (Queue.preempts), and its list and page say so."""

    form = QueueForm
    inlines = [TeamQueueInline]
    list_display = [
        "name", "priority", "teams_allowed", "max_running_cores_per_team", "max_running_jobs_per_team",
        "preempting", "preemptable", "opt_out_allowed", "is_default", "changed_by", "changed_at",
    ]  # fmt: skip
    fields = [
        "name", "description", "priority", "teams", "max_running_cores_per_team", "max_running_jobs_per_team",
        "preempts_lower", "preempting_now", "preemptable", "opt_out_allowed", "is_default", "changed_by", "changed_at",
    ]  # fmt: skip
    list_select_related = ["changed_by"]
    list_filter = ["preempts_lower", "is_default"]
    filter_horizontal = ["teams"]
    readonly_fields = ["preempting_now", "changed_by", "changed_at"]
    search_fields = ["name"]
    protected_by = ("jobs", "default_for")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Queue]:
        return super().get_queryset(request).prefetch_related("teams")

    @admin.display(description="teams")
    def teams_allowed(self, queue: Queue) -> str:
        return ", ".join(t.slug for t in queue.teams.all()) or "every team"

    @admin.display(description="preempts lower")
    def preempting(self, queue: Queue) -> str:
        if not queue.preempts_lower:
            return "no"
        return "yes" if queue.preempts else "not now: it names no teams"

    @admin.display(description="preempting now")
    def preempting_now(self, queue: Queue) -> str:
        return preemption_words(queue) if queue.pk else "once saved"

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        queue = self.get_object(request, object_id)
        if request.method == "GET" and queue is not None and queue.preempts_lower and not queue.preempts:
            self.message_user(request, f"The queue {queue.name} {preemption_words(queue)}.", level=messages.WARNING)
        return super().change_view(request, object_id, form_url, extra_context)

    def save_model(self, request: HttpRequest, obj: Queue, form: ModelForm, change: bool) -> None:
        obj.changed_by, obj.changed_at = request.user, timezone.now()  # type: ignore[assignment]
        super().save_model(request, obj, form, change)

    def save_formset(self, request: HttpRequest, form: ModelForm, formset: BaseInlineFormSet, change: bool) -> None:
        super().save_formset(request, form, formset, change)
        if formset.has_changed():  # a team's default moved here or away: a change of this queue's policy
            Queue.objects.filter(pk=form.instance.pk).update(changed_by=request.user, changed_at=timezone.now())
