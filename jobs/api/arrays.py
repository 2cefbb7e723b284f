"""The arrays API (v1): adapters over jobs.submit.forms.ArrayForm, jobs.submit.arrays and jobs.lifecycle.array_state."""

from typing import Any

import django_filters
from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from accounting.rates import RateBook
from core.bounds import COUNT, column_bounds
from core.parsers import JSONParser
from jobs.api.jobs import submitted, submitted_form
from jobs.api.serializers import ArraySubmission, JobSerializer, shown_relations, with_schedule
from jobs.lifecycle.array_state import array_in, counts_and_ends, stage_of, tasks_of, visible_arrays
from jobs.models import Job, JobArray, Outcome
from jobs.submit.again import NothingToResubmit, resubmit_array
from jobs.submit.arrays import cancel_array
from jobs.submit.forms import ArrayForm
from teams.access import SignedInAPIRequest

RESUBMIT_ONLY = ("failed", "")


class ArraySerializer(serializers.Serializer):
    """An array as every answer shows it: `counts` by stage while a task waits or runs, by outcome once released."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    team = serializers.CharField()
    size = serializers.IntegerField(**column_bounds(JobArray, "size", least=1))
    max_running = serializers.IntegerField(**column_bounds(JobArray, "max_running", least=1), allow_null=True)
    stop_after_failures = serializers.IntegerField(
        **column_bounds(JobArray, "stop_after_failures", least=1), allow_null=True
    )
    stage = serializers.CharField(help_text="release once every task is released")
    counts = serializers.DictField(child=serializers.IntegerField(**COUNT))
    submitted_at = serializers.DateTimeField()
    released_at = serializers.DateTimeField(allow_null=True)
    stopped_at = serializers.DateTimeField(allow_null=True)
    stop_reason = serializers.CharField()
    resubmitted_from = serializers.UUIDField(allow_null=True)

    def to_representation(self, array: JobArray) -> dict[str, Any]:
        found = counts_and_ends(array)
        shown = {
            "id": array.pk, "name": array.name, "team": array.team.slug, "size": array.size,
            "max_running": array.max_running, "stop_after_failures": array.stop_after_failures,
            "stage": stage_of(array, found), "counts": found, "submitted_at": array.submitted_at,
            "released_at": array.released_at, "stopped_at": array.stopped_at, "stop_reason": array.stop_reason,
            "resubmitted_from": array.resubmitted_from_id,
        }  # fmt: skip
        return super().to_representation(shown)


class TaskFilter(django_filters.FilterSet):
    outcome = django_filters.ChoiceFilter(choices=Outcome.choices, help_text="How a released task ended.")

    class Meta:
        model = Job
        fields = ["outcome"]


class ArrayViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet[JobArray]):
    serializer_class = ArraySerializer
    parser_classes = [MultiPartParser, FormParser, JSONParser]
    lookup_value_regex = "[0-9a-fA-F-]{36}"

    def get_queryset(self) -> QuerySet[JobArray]:
        return visible_arrays(self.request.user).select_related("team")

    def get_object(self) -> JobArray:
        return array_in(self.get_queryset(), self.kwargs["pk"])

    @extend_schema(
        request={"multipart/form-data": ArraySubmission, "application/json": ArraySubmission},
        responses={201: ArraySerializer, 200: ArraySerializer},
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER, required=False)],
    )
    def create(self, request: SignedInAPIRequest) -> Response:
        """Submit an array: every field of POST /api/v1/jobs/, and `indices` (and `max_running`,
        `stop_after_failures`); each task is a job with E31_ARRAY_INDEX, E31_ARRAY_SIZE and E31_ARRAY_ID."""
        form, key = submitted_form(request, ArrayForm)
        return submitted(self, request, form, key, array=form.array_request())

    @extend_schema(
        parameters=[OpenApiParameter("outcome", str, enum=Outcome.values, description="How a task ended.")],
        responses=JobSerializer(many=True),
    )
    @action(detail=True, methods=["get"])
    def tasks(self, request: Request, pk: str | None = None) -> Response:
        """The tasks as jobs, in index order, paged."""
        array = self.get_object()
        tasks = TaskFilter(request.query_params, queryset=tasks_of(array))
        if not tasks.is_valid():
            raise ValidationError(tasks.errors)
        rows = with_schedule(tasks.qs.select_related("team", "image", "cancelled_by", "queue")).prefetch_related(
            *shown_relations()
        )
        page = self.paginate_queryset(rows)  # type: ignore[arg-type]  # a page of the array's tasks
        context = {**self.get_serializer_context(), "book": RateBook.load(), "explain": False}
        return self.get_paginated_response(JobSerializer(page, many=True, context=context).data)

    @extend_schema(request=None, responses={202: ArraySerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: SignedInAPIRequest, pk: str | None = None) -> Response:
        """Every task not yet released ends cancelled (a running one is stopped by its node)."""
        array = self.get_object()
        cancel_array(array, now=timezone.now(), acting_user=request.user)
        return Response(self.get_serializer(array).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        request=None,
        parameters=[OpenApiParameter("only", str, enum=["failed"], description="failed: only the failed tasks")],
        responses={201: ArraySerializer},
    )
    @action(detail=True, methods=["post"])
    def resubmit(self, request: SignedInAPIRequest, pk: str | None = None) -> Response:
        """A new array of the same declaration: of the failed tasks' indices (`only=failed`), or of all."""
        only = request.query_params.get("only", "")
        if only not in RESUBMIT_ONLY:
            raise ValidationError({"only": ["Must be failed, or left out for every task."]})
        array = self.get_object()
        try:
            again = resubmit_array(array, only=only, user=request.user)
        except NothingToResubmit as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(self.get_serializer(again).data, status=status.HTTP_201_CREATED)
