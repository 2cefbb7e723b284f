"""The operators' utilisation page and API (others get 404)."""

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.filters import BadMoments, moment_range
from core.when import MOMENT_SCHEMA
from pool.utilisation import STEPS, Report, current_end, utilisation
from teams.access import is_operator


class BadRange(ValueError):
    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__(str(errors))
        self.errors = errors


def report_for(params: Mapping[str, Any], *, now: datetime) -> Report:
    """The report of `step` (default day) from `since` (default 30 days, or 7 of hours, before `until`) to
    `until` (default: to the end of the day, or hour, under way, so today is in it)."""
    get = params.get
    step = get("step") or "day"
    if step not in STEPS:
        raise BadRange({"step": [f"One of: {', '.join(STEPS)}."]})
    try:
        since_asked, until_asked = moment_range(params)
    except BadMoments as exc:
        raise BadRange(exc.errors) from None
    until = until_asked or current_end(now, step)
    since = since_asked or until - timedelta(days=7 if step == "hour" else 30)
    try:
        return utilisation(since=since, until=until, step=step, now=now)
    except ValueError as exc:
        raise BadRange({"since": [str(exc)]}) from None


@require_GET
@login_required
def utilisation_page(request: HttpRequest) -> HttpResponse:
    if not is_operator(request.user):
        raise Http404("No such page.")
    now = timezone.now()
    try:
        report = report_for(request.GET, now=now)
    except BadRange as exc:
        return render(request, "pool/utilisation.html", {"errors": exc.errors}, status=400)
    context = {"report": report.as_dict(), "chart": report.chart(), "since": report.since, "to": min(report.until, now)}
    return render(request, "pool/utilisation.html", context)


class CellSerializer(serializers.Serializer):
    held_core_seconds = serializers.FloatField(read_only=True)
    available_core_seconds = serializers.FloatField(read_only=True)
    drained_core_seconds = serializers.FloatField(read_only=True)
    utilisation = serializers.CharField(allow_null=True, help_text="held / available, 4 places; null: none available")


class NodeCellSerializer(CellSerializer):
    node = serializers.CharField()


class BucketSerializer(CellSerializer):
    start = serializers.DateTimeField()
    nodes = serializers.DictField(child=CellSerializer(), help_text="by node name, the nodes with a cell in it")


class UtilisationSerializer(serializers.Serializer):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    step = serializers.ChoiceField(choices=list(STEPS))
    overall = CellSerializer()
    nodes = NodeCellSerializer(many=True)
    buckets = BucketSerializer(many=True)


class UtilisationView(APIView):
    """Held over available core-seconds per node and overall, by hour or day (operators only)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("step", str, enum=list(STEPS)),
            OpenApiParameter(
                "since", MOMENT_SCHEMA, description="from: an ISO 8601 date or date-time, or a duration ago (24h)"
            ),
            OpenApiParameter(
                "until", MOMENT_SCHEMA, description="before: an ISO 8601 date or date-time, or a duration ago"
            ),
        ],
        responses={200: UtilisationSerializer},
    )
    def get(self, request: Request) -> Response:
        if not is_operator(request.user):
            raise NotFound()
        try:
            report = report_for(request.query_params, now=timezone.now())
        except BadRange as exc:
            raise ValidationError(exc.errors) from None
        return Response(report.as_dict())
