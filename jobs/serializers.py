from datetime import datetime
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib.auth.models import User
from django.db.models import Prefetch
from django.utils import timezone
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.utils import Direction, extend_schema_field
from rest_framework import serializers

from accounting.models import Record
from accounting.rates import Estimate, RateBook
from core.when import BAD_DURATION, DurationTooLong, parse_duration
from jobs.forms import JobForm
from jobs.models import DataFile, Job, OutputFile, RuntimeImage
from jobs.queue import standing
from jobs.worst_case import job_estimate, request_estimate
from pool.models import Hold
from teams.models import Team

if TYPE_CHECKING:
    from drf_spectacular.openapi import AutoSchema


class HoldSerializer(serializers.ModelSerializer[Hold]):
    node = serializers.CharField(source="node.name")
    cpu_set = serializers.ListField(child=serializers.IntegerField())
    memory_mb = serializers.IntegerField()
    gpus = serializers.ListField(child=serializers.CharField(), source="gpu_ids")
    runtime = serializers.CharField(
        help_text="the container runtime its run used (runc, runsc); empty before it started"
    )

    class Meta:
        model = Hold
        fields = ["node", "cpu_set", "memory_mb", "gpus", "runtime"]


class RecordSummarySerializer(serializers.ModelSerializer[Record]):
    id = serializers.UUIDField()
    sequence = serializers.IntegerField()
    held_seconds = serializers.DecimalField(max_digits=14, decimal_places=3)
    cpu_seconds = serializers.DecimalField(max_digits=14, decimal_places=3)
    cost = serializers.DecimalField(max_digits=14, decimal_places=6)
    currency = serializers.CharField(allow_null=True, help_text="null on records written before currencies were kept")
    outcome = serializers.CharField()
    hash = serializers.CharField()

    class Meta:
        model = Record
        fields = ["id", "sequence", "held_seconds", "cpu_seconds", "cost", "currency", "outcome", "hash"]


class EstimateSerializer(serializers.Serializer):
    """A job's worst case: its whole request held for as long as the meter may count (its time limit and
    the platform's overhead), at the rate in force."""

    words = serializers.CharField(help_text='as people read it: "0.52 EUR", or "less than 0.01 EUR"')
    amount = serializers.CharField(help_text="rounded half up to the cent")
    exact = serializers.CharField(help_text="exact to 0.000001: what a record of a hold metered to its bound costs")
    currency = serializers.CharField()
    core_hours = serializers.CharField(help_text="held core-hours at worst (rounded up)")
    held_seconds = serializers.IntegerField(help_text="the most a hold of the job is metered: time limit + overhead")
    overhead_s = serializers.IntegerField(
        help_text="the platform's part beyond the time limit: the run's start, the kill, output collection, the release"
    )
    rate_id = serializers.IntegerField(help_text="the rate card row (0: the settings' rates)")


def _bounded(name: str, *, default: int | None = None) -> serializers.IntegerField:
    """An integer with the bounds JobForm gives the field of that name (the one validator of requests)."""
    field = JobForm.base_fields[name]
    assert isinstance(field, forms.IntegerField)
    bounds: dict[str, Any] = {"min_value": field.min_value, "max_value": field.max_value}
    return (
        serializers.IntegerField(**bounds) if default is None else serializers.IntegerField(**bounds, default=default)
    )


@extend_schema_field(
    {
        "oneOf": [{"type": "integer", "minimum": 1}, {"type": "string"}],
        "description": "seconds, or a duration with units: 90s, 90m, 2h, 1h30m, 1d (at most E31_TIME_LIMIT_MAX_S)",
    }
)
class DurationSecondsField(serializers.IntegerField):
    """Seconds, or a duration with units, read as the form reads it (core.when.parse_duration)."""

    default_error_messages = {"invalid": BAD_DURATION}

    def to_internal_value(self, data: Any) -> int:
        try:
            seconds = parse_duration(data)
        except DurationTooLong:
            most = JobForm.maxima()["time_limit_s"]
            raise serializers.ValidationError(f"Ensure this value is less than or equal to {most}.") from None
        if seconds is None:
            self.fail("invalid")
        return super().to_internal_value(seconds)


class EstimateRequest(serializers.Serializer):
    """The request of a job not submitted yet: what POST /api/v1/jobs/estimate/ (and the form's estimate) take."""

    cpus = _bounded("cpus")
    memory_mb = _bounded("memory_mb")
    gpus = _bounded("gpus", default=0)
    time_limit_s = DurationSecondsField(min_value=1)
    image = serializers.SlugRelatedField(
        slug_field="name", queryset=RuntimeImage.objects.all(), required=False, allow_null=True, default=None
    )

    def validate_time_limit_s(self, value: int) -> int:
        """The form's limit, read from the settings as each form is made (the field above has none): a
        worst case of a time limit without one overflowed the decimals of a cost."""
        if value > (most := JobForm.maxima()["time_limit_s"]):
            raise serializers.ValidationError(f"Ensure this value is less than or equal to {most}.")
        return value

    def estimate(self, *, now: datetime) -> Estimate:
        d = self.validated_data
        return request_estimate(
            cpus=d["cpus"], memory_mb=d["memory_mb"], gpus=d["gpus"], time_limit_s=d["time_limit_s"],
            image=d["image"], now=now,
        )  # fmt: skip


class DataFileSerializer(serializers.ModelSerializer[DataFile]):
    class Meta:
        model = DataFile
        fields = ["name", "size", "sha256"]


class QueueSerializer(serializers.Serializer):
    """Where a waiting job stands, as the last scheduler pass stored it."""

    position = serializers.IntegerField(help_text="1 is next")
    queued = serializers.IntegerField(help_text="jobs waiting in all")
    reason = serializers.CharField(help_text="why it waits")
    expected_start = serializers.DateTimeField(
        allow_null=True,
        help_text="when it is expected to start at the latest: set while the pass reserves compute for it",
    )


def shown_relations() -> list[Prefetch]:
    """What a job's answer shows beside it (JobSerializer's and listed_job's hold, record and data), into
    lists of their own (Django's `to_attr`): a prefetch into the related managers builds a filtered
    QuerySet per job, a third of a list page's time. The holds come with their nodes and records, and
    only the columns shown or needed to find the last hold (a record's other columns cost more to read
    than the rest of the row)."""
    shown = _sources(HoldSerializer) + [f"record__{source}" for source in _sources(RecordSummarySerializer)]
    holds = Hold.objects.select_related("node", "record").only("job_id", "held_at", *shown)
    data_files = Prefetch("data_files", to_attr="shown_data_files")
    return [Prefetch("holds", queryset=holds, to_attr="shown_holds"), data_files]


def _sources(kind: type[serializers.Serializer]) -> list[str]:
    """The columns a serializer's declared fields show, as a query names them (node.name: node__name)."""
    return [str(field.source or name).replace(".", "__") for name, field in kind._declared_fields.items()]


class JobSerializer(serializers.ModelSerializer[Job]):
    team: serializers.SlugRelatedField[Team] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    image: serializers.SlugRelatedField[RuntimeImage] = serializers.SlugRelatedField(slug_field="name", read_only=True)
    request = serializers.SerializerMethodField()
    outputs = serializers.ListField(source="output_patterns", child=serializers.CharField(), read_only=True)
    # The serializer's metaclass takes declared fields out of the class, so .data stays the rendered
    # job; the stubs see this field as the class attribute Serializer.data.
    data = DataFileSerializer(source="data_files_by_name", many=True, read_only=True)  # type: ignore[assignment]
    hold = serializers.SerializerMethodField()
    record = serializers.SerializerMethodField()
    queue = serializers.SerializerMethodField()
    estimated_cost = serializers.SerializerMethodField()
    cancelled_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = Job
        fields = [
            "id", "name", "team", "image", "command", "env", "request", "data", "outputs", "max_retries", "isolation",
            "attempt",
            "stage", "outcome", "exit_code", "reason", "cancel_requested", "cancelled_by", "queue",
            "submitted_at", "held_at", "started_at", "finished_at", "released_at",
            "hold", "record", "estimated_cost", "files_deleted_at", "pinned_until",
        ]  # fmt: skip

    def get_request(self, job: Job) -> dict:
        return {"cpus": job.cpus, "memory_mb": job.memory_mb, "gpus": job.gpus, "time_limit_s": job.time_limit_s}

    def _last_hold(self, job: Job) -> Hold | None:
        return max(job.shown_holds, key=lambda h: h.held_at, default=None)

    def get_hold(self, job: Job) -> dict | None:
        hold = self._last_hold(job)
        return HoldSerializer(hold).data if hold else None

    @extend_schema_field(QueueSerializer(allow_null=True))
    def get_queue(self, job: Job) -> dict | None:
        """A waiting job's place in the queue, why it waits and when it is expected to start (on the
        job's own page only)."""
        if not self.context.get("explain"):
            return None
        found = standing(job)
        return QueueSerializer(found).data if found else None

    @extend_schema_field(EstimateSerializer)
    def get_estimated_cost(self, job: Job) -> dict:
        """The job's worst case at the rate of its RENT (the rate in force now, while it waits)."""
        return job_estimate(job, now=timezone.now(), book=RateBook.load()).as_dict()

    def get_record(self, job: Job) -> dict | None:
        hold = self._last_hold(job)
        record = getattr(hold, "record", None) if hold else None
        return RecordSummarySerializer(record).data if record else None


_MOMENT = serializers.DateTimeField()  # DRF's own conversions, used unbound by the presenter below
_SECONDS = serializers.DecimalField(max_digits=14, decimal_places=3)
_COST = serializers.DecimalField(max_digits=14, decimal_places=6)


def listed_job(job: Job, *, estimate: Estimate) -> dict[str, Any]:
    """A job of the API's list or a submission's answer, as JobSerializer shows it (tests/jobs/test_api.py
    holds them equal) but in plain code: a serializer per row and per row's hold and record cost the
    list page twice the time. `job` is loaded as JobViewSet.get_queryset loads it; `estimate` is its
    worst case."""
    hold = max(job.shown_holds, key=lambda h: h.held_at, default=None)
    record = getattr(hold, "record", None) if hold else None
    moment = _MOMENT.to_representation

    def when(value: datetime | None) -> str | None:
        return None if value is None else moment(value)

    return {
        "id": str(job.id), "name": job.name, "team": job.team.slug, "image": job.image.name,
        "command": job.command, "env": job.env,
        "request": {"cpus": job.cpus, "memory_mb": job.memory_mb, "gpus": job.gpus, "time_limit_s": job.time_limit_s},
        "data": [{"name": f.name, "size": f.size, "sha256": f.sha256} for f in job.data_files_by_name],
        "outputs": job.output_patterns, "max_retries": job.max_retries, "isolation": job.isolation,
        "attempt": job.attempt, "stage": job.stage, "outcome": job.outcome, "exit_code": job.exit_code,
        "reason": job.reason, "cancel_requested": job.cancel_requested,
        "cancelled_by": job.cancelled_by.username if job.cancelled_by else None, "queue": None,
        "submitted_at": when(job.submitted_at), "held_at": when(job.held_at), "started_at": when(job.started_at),
        "finished_at": when(job.finished_at), "released_at": when(job.released_at),
        "hold": None if hold is None else {
            "node": hold.node.name, "cpu_set": hold.cpu_set, "memory_mb": hold.memory_mb, "gpus": hold.gpu_ids,
            "runtime": hold.runtime,
        },
        "record": None if record is None else {
            "id": str(record.id), "sequence": record.sequence,
            "held_seconds": _SECONDS.to_representation(record.held_seconds),
            "cpu_seconds": _SECONDS.to_representation(record.cpu_seconds), "cost": _COST.to_representation(record.cost),
            "currency": record.currency, "outcome": record.outcome, "hash": record.hash,
        },
        "estimated_cost": estimate.as_dict(),
        "files_deleted_at": when(job.files_deleted_at), "pinned_until": when(job.pinned_until),
    }  # fmt: skip


class OutputFileSerializer(serializers.ModelSerializer[OutputFile]):
    class Meta:
        model = OutputFile
        fields = ["path", "size", "sha256"]


class JobSubmission:
    """The body of POST /api/v1/jobs/ in the OpenAPI document (see submission_schema)."""


def submission_schema() -> dict:
    """The body of a submission in OpenAPI terms, as JobForm's fields say it (each its own `schema`)."""
    maxima = JobForm.maxima()
    properties, required = {}, []
    for name, field in JobForm.base_fields.items():
        schema = field.schema(maxima.get(name))  # type: ignore[attr-defined]
        if field.label:
            schema["title"] = str(field.label)
        if field.help_text:
            schema["description"] = str(field.help_text)
        if not field.required and field.initial is not None:
            schema["default"] = field.initial
        properties[name] = schema
        if field.required:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


class JobSubmissionExtension(OpenApiSerializerExtension):
    target_class = JobSubmission

    def get_name(self, auto_schema: "AutoSchema", direction: Direction) -> str:
        return "JobSubmission"

    def map_serializer(self, auto_schema: "AutoSchema", direction: Direction) -> dict[str, Any]:
        return submission_schema()  # at each generation of the document, so the settings' limits hold
