from datetime import UTC, datetime
from decimal import Decimal

from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounting.filters import RecordFilter
from accounting.models import Record
from accounting.reports import GROUPS, records_for, usage
from teams.access import teams_of
from teams.models import Team


class RecordSerializer(serializers.ModelSerializer[Record]):
    team: serializers.SlugRelatedField[Team] = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Record
        fields = [
            "id", "job", "team", "node", "cpu_set", "cpus", "memory_mb", "gpus", "gpu_ids",
            "held_at", "released_at", "held_seconds", "cpu_seconds", "memory_peak_mb", "cost",
            "outcome", "sequence", "prev_hash", "hash",
        ]  # fmt: skip


class RecordViewSet(viewsets.ReadOnlyModelViewSet[Record]):
    serializer_class = RecordSerializer
    filterset_class = RecordFilter

    def get_queryset(self) -> QuerySet[Record]:
        records = records_for(self.request.user, teams=teams_of(self.request.user)).select_related("team")
        return records.order_by("-sequence")


def parse_when(name: str, raw: str | None) -> datetime | None:
    """An ISO 8601 date or date-time; naive ones are in the site's time zone."""
    if not raw:
        return None
    try:
        # Both parsers raise ValueError for a well-formed impossible date such as 2026-02-30.
        value = parse_datetime(raw)
        if value is None and (day := parse_date(raw)):
            value = datetime(day.year, day.month, day.day)
    except ValueError:
        value = None
    if value is None:
        raise ValidationError({name: ["Use an ISO 8601 date or date-time."]})
    value = timezone.make_aware(value) if timezone.is_naive(value) else value
    return value.astimezone(UTC)  # PostgreSQL takes offsets up to ±15:59 only; ISO 8601 up to ±23:59


class UsageView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("since", str),
            OpenApiParameter("until", str),
            OpenApiParameter("group_by", str, enum=list(GROUPS)),
        ],
        responses={200: dict},
    )
    def get(self, request: Request) -> Response:
        group_by = request.query_params.get("group_by", "day")
        if group_by not in GROUPS:
            raise ValidationError({"group_by": [f"One of: {', '.join(GROUPS)}."]})
        since = parse_when("since", request.query_params.get("since"))
        until = parse_when("until", request.query_params.get("until"))
        records = records_for(request.user, teams=teams_of(request.user))
        rows = usage(records, group_by=group_by, since=since, until=until)
        # Sums of seconds and money stay exact strings, as in the records (JSON would make floats).
        rows = [{k: str(v) if isinstance(v, Decimal) else v for k, v in row.items()} for row in rows]
        return Response({"group_by": group_by, "rows": rows})
