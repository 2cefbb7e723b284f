"""The pool API: nodes and their free capacity, operators drain and resume them; maintenance windows ahead."""

from datetime import datetime
from functools import cached_property
from typing import Any

import django_filters
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.bounds import COUNT
from pool.models import REASON_MAX, MaintenanceWindow, Node
from pool.nodes import NodeOffline, free_capacity, set_state
from teams.access import SignedInAPIRequest, is_operator


class IsOperator(permissions.BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        return is_operator(request.user)


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


class NodeSerializer(serializers.ModelSerializer[Node]):
    cpus = serializers.IntegerField(**COUNT, read_only=True)
    gpus = serializers.IntegerField(**COUNT, read_only=True)
    features = serializers.ListField(
        child=serializers.CharField(), read_only=True, help_text="What a job's constraint may ask of it, in name order."
    )
    free = serializers.SerializerMethodField()
    state_changed_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = Node
        fields = [
            "name", "state", "cpus", "cpu_ids", "memory_mb", "gpus", "gpu_ids", "features", "free", "last_heartbeat",
            "state_changed_by", "state_changed_at", "state_reason",
        ]  # fmt: skip

    def get_free(self, node: Node) -> dict:
        f = self.context["free"][node.pk]
        return {"cpus": len(f.cpu_ids), "cpu_ids": f.cpu_ids, "memory_mb": f.memory_mb, "gpus": len(f.gpu_ids)}


class DrainSerializer(serializers.Serializer):
    reason = serializers.CharField(
        max_length=REASON_MAX,
        help_text="Why (maintenance, a failing disk…): on the operator panel and in the node's history.",
    )


class ResumeSerializer(serializers.Serializer):
    reason = serializers.CharField(
        max_length=REASON_MAX, required=False, allow_blank=True, help_text="Why, if you will."
    )


class NodeFilter(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=Node.State.choices, help_text="The node's state.")
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", max_length=100, help_text="In the name.")

    class Meta:
        model = Node
        fields: list[str] = []


class NodeViewSet(viewsets.ReadOnlyModelViewSet[Node]):
    queryset = Node.objects.select_related("state_changed_by").order_by("name")
    serializer_class = NodeSerializer
    filterset_class = NodeFilter
    lookup_field = "name"
    lookup_value_regex = "[-a-zA-Z0-9_]+"  # a node's name is a slug: anything else is no node (404), not a query
    pagination_class = None

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        context["free"] = free_capacity(list(self.get_queryset()))
        return context

    def _set_state(self, request: SignedInAPIRequest, state: str, why: serializers.Serializer) -> Response:
        node = self.get_object()  # an unknown node is 404 before a missing reason is 400
        why.is_valid(raise_exception=True)
        try:
            node = set_state(
                node, state, now=timezone.now(), acting_user=request.user, reason=why.validated_data.get("reason", "")
            )
        except NodeOffline as exc:
            raise Conflict(str(exc)) from None
        return Response(self.get_serializer(node).data)

    @extend_schema(request=DrainSerializer)
    @action(detail=True, methods=["post"], permission_classes=[IsOperator])
    def drain(self, request: SignedInAPIRequest, name: str | None = None) -> Response:
        """No new holds on the node; the jobs running there finish. `reason` is required."""
        return self._set_state(request, Node.State.DRAINING, DrainSerializer(data=request.data))

    @extend_schema(request=ResumeSerializer)
    @action(detail=True, methods=["post"], permission_classes=[IsOperator])
    def resume(self, request: SignedInAPIRequest, name: str | None = None) -> Response:
        return self._set_state(request, Node.State.ACTIVE, ResumeSerializer(data=request.data))


class MaintenanceWindowSerializer(serializers.ModelSerializer[MaintenanceWindow]):
    nodes: serializers.SlugRelatedField[Node] = serializers.SlugRelatedField(
        slug_field="name", many=True, read_only=True, help_text="The nodes it is on; empty: every node."
    )
    under_way = serializers.SerializerMethodField(help_text="Whether it has started.")

    class Meta:
        model = MaintenanceWindow
        fields = ["id", "starts_at", "ends_at", "reason", "nodes", "under_way"]

    def get_under_way(self, window: MaintenanceWindow) -> bool:
        return window.starts_at <= self.context["now"]


class MaintenanceWindowViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[MaintenanceWindow]):
    """The maintenance windows not over yet, earliest first: no job is held on their nodes whose time limit
    would run into one; it waits until the window ends. Operators schedule them in the admin."""

    serializer_class = MaintenanceWindowSerializer
    pagination_class = None  # a handful at most

    def get_queryset(self) -> QuerySet[MaintenanceWindow]:
        ahead = MaintenanceWindow.objects.filter(ends_at__gt=self.now)
        return ahead.prefetch_related("nodes").order_by("starts_at", "pk")

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "now": self.now}

    @cached_property
    def now(self) -> datetime:
        return timezone.now()
