from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounting.access import team_for
from accounting.csvexport import CSVRenderer, csv_text
from accounting.filters import RecordFilter
from accounting.models import Record
from accounting.rates import shown
from accounting.reports import GROUPS, records_for, usage
from accounting.statements import LINE_COLUMNS, parse_month, pool_summary, statement
from core.bounds import COUNT, column_bounds
from core.filters import BadMoments, moment_range
from core.outcomes import Outcome
from core.pagination import BoundedPageNumbers
from core.when import MOMENT_SCHEMA
from teams.access import is_operator, teams_of
from teams.models import Team


def alloc_tres(record: Record) -> str:
    """The held resources as Slurm's AllocTRES says them: cpu=2,mem=512M,gres/gpu=0."""
    return f"cpu={record.cpus},mem={record.memory_mb}M,gres/gpu={record.gpus}"


def four_places(ratio: Decimal | None) -> str | None:
    """A ratio as the API writes it: 4 places, half up (None stays None)."""
    return None if ratio is None else format(ratio.quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP), "f")


class RecordSerializer(serializers.ModelSerializer[Record]):
    """One record: what was held, for how long, how it was used and how it ended (as sacct, and more)."""

    team: serializers.SlugRelatedField[Team] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    user = serializers.CharField(source="job.submitted_by.username", read_only=True)
    job_name = serializers.CharField(source="job.name", read_only=True)
    elapsed = serializers.SerializerMethodField(help_text="[D-]HH:MM:SS held, as sacct's Elapsed")
    alloc_tres = serializers.SerializerMethodField(help_text="the held resources, as Slurm's AllocTRES")
    cpu_seconds_held = serializers.SerializerMethodField(help_text="held seconds × held cores")
    cpu_seconds_used = serializers.DecimalField(
        source="cpu_seconds", max_digits=14, decimal_places=3, read_only=True, help_text="cpu time the job used"
    )
    peak_memory_bytes = serializers.SerializerMethodField(help_text="peak memory used (null: not measured)")
    cpu_efficiency = serializers.SerializerMethodField(help_text="cpu time used / cpu time held")
    memory_efficiency = serializers.SerializerMethodField(help_text="peak memory used / memory held")
    attempt = serializers.SerializerMethodField()
    cost_shown = serializers.SerializerMethodField(help_text="the cost rounded half up to the cent")

    class Meta:
        model = Record
        fields = [
            "id", "sequence", "job", "job_name", "team", "user", "node", "attempt", "image",
            "held_at", "released_at", "elapsed", "held_seconds",
            "alloc_tres", "cpu_set", "cpus", "memory_mb", "gpus", "gpu_ids",
            "cpu_seconds_held", "cpu_seconds_used", "cpu_seconds", "memory_peak_mb", "peak_memory_bytes",
            "cpu_efficiency", "memory_efficiency",
            "exit_code", "outcome",
            "cost", "cost_shown", "currency", "rate_id", "rate_core_hour", "rate_gb_hour", "rate_gpu_hour",
            "layout", "prev_hash", "hash",
        ]  # fmt: skip

    def get_elapsed(self, record: Record) -> str:
        days, rest = divmod(int(record.held_seconds), 86400)  # whole seconds, rounded down
        text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
        return f"{days}-{text}" if days else text

    def get_alloc_tres(self, record: Record) -> str:
        return alloc_tres(record)

    def get_cpu_seconds_held(self, record: Record) -> str:
        return format(record.held_seconds * record.cpus, "f")

    def get_peak_memory_bytes(self, record: Record) -> int | None:
        return None if record.memory_peak_mb is None else record.memory_peak_mb * 1024 * 1024

    def get_cpu_efficiency(self, record: Record) -> str | None:
        return four_places(record.cpu_efficiency())

    def get_memory_efficiency(self, record: Record) -> str | None:
        return four_places(record.memory_efficiency())

    def get_attempt(self, record: Record) -> int:
        """Kept on the record since layout 2; the hold's before."""
        return record.attempt if record.attempt is not None else record.hold.attempt

    def get_cost_shown(self, record: Record) -> str:
        return shown(record.cost)


class CSVPagination(BoundedPageNumbers):
    """Pages of JSON; CSV (`?format=csv`) is the whole filtered list at once, as an export."""

    def paginate_queryset(self, queryset: QuerySet, request: Request, view: Any = None) -> list | None:
        if request.query_params.get("format") == "csv":
            return None
        return super().paginate_queryset(queryset, request, view)


FORMAT = OpenApiParameter(
    "format", str, enum=["json", "csv"], description="csv: the whole filtered list as CSV, not paged (an export)"
)


@extend_schema_view(list=extend_schema(parameters=[FORMAT]), retrieve=extend_schema(parameters=[FORMAT]))
class RecordViewSet(viewsets.ReadOnlyModelViewSet[Record]):
    """Records like sacct: filters team (operators: any), user, since, until, outcome, node, job; `?format=csv`."""

    serializer_class = RecordSerializer
    filterset_class = RecordFilter
    pagination_class = CSVPagination
    renderer_classes = [JSONRenderer, BrowsableAPIRenderer, CSVRenderer]

    def get_queryset(self) -> QuerySet[Record]:
        records = records_for(self.request.user, teams=teams_of(self.request.user))
        return records.select_related("team", "hold", "job__submitted_by").order_by("-sequence")


# The usage API's parameters, for this view and the one that adds the store's use to it (ops.api).
USAGE_PARAMETERS = [
    OpenApiParameter(
        "since", MOMENT_SCHEMA, description="from: an ISO 8601 date or date-time, or a duration ago (24h)"
    ),
    OpenApiParameter("until", MOMENT_SCHEMA, description="before: an ISO 8601 date or date-time, or a duration ago"),
    OpenApiParameter("group_by", str, enum=list(GROUPS)),
]


class UsageRowSerializer(serializers.Serializer):
    """One group's sums (the group: the one of `day`, `team`, `node` that `group_by` names)."""

    day = serializers.DateField(required=False)
    team, node = (serializers.CharField(required=False) for _ in range(2))
    jobs, records = (serializers.IntegerField(**COUNT) for _ in range(2))
    held_seconds, cpu_seconds, cost = (
        serializers.CharField(help_text="an exact decimal, as the records'") for _ in range(3)
    )


class UsageSerializer(serializers.Serializer):
    group_by = serializers.ChoiceField(choices=list(GROUPS))
    rows = UsageRowSerializer(many=True)


class UsageView(APIView):
    @extend_schema(parameters=USAGE_PARAMETERS, responses={200: UsageSerializer})
    def get(self, request: Request) -> Response:
        group_by = request.query_params.get("group_by", "day")
        if group_by not in GROUPS:
            raise ValidationError({"group_by": [f"One of: {', '.join(GROUPS)}."]})
        try:
            since, until = moment_range(request.query_params)
        except BadMoments as exc:
            raise ValidationError(exc.errors) from None
        records = records_for(request.user, teams=teams_of(request.user))
        rows = usage(records, group_by=group_by, since=since, until=until)
        # Sums of seconds and money stay exact strings, as in the records (JSON would make floats).
        rows = [{k: str(v) if isinstance(v, Decimal) else v for k, v in row.items()} for row in rows]
        return Response({"group_by": group_by, "rows": rows})


# A month as parse_month reads it, in the years core.when reads (0002 to 9998).
MONTH_PATTERN = r"^(000[2-9]|00[1-9]\d|0[1-9]\d\d|[1-8]\d{3}|9[0-8]\d\d|99[0-8]\d|999[0-8])-(0[1-9]|1[0-2])$"


class MonthSerializer(serializers.Serializer):
    month = serializers.CharField(help_text="YYYY-MM")
    currency = serializers.CharField()
    total_cost = serializers.CharField(help_text="rounded as `rounding` says")
    total_cost_exact = serializers.CharField()
    rounding = serializers.CharField()


SEQUENCE = column_bounds(Record, "sequence")
AMOUNTS = ("cpus", "memory_mb", "gpus")


class PoolLedgerSerializer(serializers.Serializer):
    head_sequence = serializers.IntegerField(**SEQUENCE, help_text="the ledger's head when the month was read")
    head_hash = serializers.CharField()


class StatementLedgerSerializer(PoolLedgerSerializer):
    first_sequence = serializers.IntegerField(**SEQUENCE, allow_null=True, help_text="the month's first record")
    last_sequence = serializers.IntegerField(**SEQUENCE, allow_null=True)
    last_hash = serializers.CharField(allow_null=True)


class StatementLineSerializer(serializers.Serializer):
    """One record of the statement; decimals are exact strings."""

    sequence = serializers.IntegerField(**SEQUENCE)
    record, job = (serializers.UUIDField() for _ in range(2))
    job_name, user, node = (serializers.CharField() for _ in range(3))
    attempt = serializers.IntegerField(**column_bounds(Record, "attempt", least=1), allow_null=True)
    held_at, released_at = (serializers.DateTimeField() for _ in range(2))
    held_seconds = serializers.CharField()
    cpus, memory_mb, gpus = (serializers.IntegerField(**column_bounds(Record, name)) for name in AMOUNTS)
    outcome = serializers.ChoiceField(choices=Outcome.choices)
    charged = serializers.BooleanField(help_text="false: its team does not pay for it (a preempted attempt, cost 0)")
    rate_core_hour, rate_gb_hour, rate_gpu_hour = (serializers.CharField(allow_null=True) for _ in range(3))
    cost, cost_shown, currency = (serializers.CharField() for _ in range(3))


class NotChargedSerializer(serializers.Serializer):
    records = serializers.IntegerField(**COUNT, help_text="how many of the month's records their team does not pay for")
    rule = serializers.CharField(help_text="which records those are")


class StatementSerializer(MonthSerializer):
    team = serializers.CharField()
    records = serializers.IntegerField(**COUNT)
    not_charged = NotChargedSerializer()
    ledger = StatementLedgerSerializer()
    lines = StatementLineSerializer(many=True)


class PoolTeamSerializer(serializers.Serializer):
    team = serializers.CharField()
    records = serializers.IntegerField(**COUNT)
    total_cost, total_cost_exact, held_seconds = (serializers.CharField() for _ in range(3))
    first_sequence, last_sequence = (serializers.IntegerField(**SEQUENCE) for _ in range(2))


class PoolSummarySerializer(MonthSerializer):
    ledger = PoolLedgerSerializer()
    teams = PoolTeamSerializer(many=True)


class StatementView(APIView):
    """A team's monthly statement (JSON, or `&format=csv`: one row per record); operators without
    `team` get the pool's summary of the month, team by team."""

    renderer_classes = [JSONRenderer, BrowsableAPIRenderer, CSVRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter("team", str, description="a team's slug (operators may leave it out: the pool)"),
            OpenApiParameter("month", str, description="YYYY-MM", required=True, pattern=MONTH_PATTERN),
            OpenApiParameter("format", str, enum=["json", "csv"]),
        ],
        responses={
            200: PolymorphicProxySerializer(
                "StatementOrPoolSummary", [StatementSerializer, PoolSummarySerializer], resource_type_field_name=None
            )
        },
    )
    def get(self, request: Request) -> Response | HttpResponse:
        month = parse_month(request.query_params.get("month", ""))
        if month is None:
            raise ValidationError({"month": ["A month as YYYY-MM."]})
        slug = request.query_params.get("team", "")
        as_csv = request.query_params.get("format") == "csv"
        if not slug:
            if not is_operator(request.user):
                raise ValidationError({"team": ["A team's slug."]})
            summary = pool_summary(month)
            if as_csv:
                return _csv(csv_text(summary["teams"], POOL_COLUMNS), f"pool-{month:%Y-%m}.csv")
            return Response(summary)
        found = statement(team_for(request.user, slug), month)
        if as_csv:
            return _csv(csv_text(found.lines, LINE_COLUMNS), f"statement-{slug}-{month:%Y-%m}.csv")
        return Response(found.as_dict())


POOL_COLUMNS = ("team", "records", "held_seconds", "total_cost", "total_cost_exact", "first_sequence", "last_sequence")


def _csv(text: str, filename: str) -> HttpResponse:
    response = HttpResponse(text, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
