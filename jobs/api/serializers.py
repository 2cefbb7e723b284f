from datetime import datetime
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib.auth.models import User
from django.db.models import JSONField, OuterRef, Prefetch, QuerySet, Subquery
from django.db.models.functions import Coalesce, JSONObject
from django.utils import timezone
from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from drf_spectacular.utils import Direction
from rest_framework import serializers

from accounting.models import Record
from accounting.rates import Estimate
from core.bounds import BIGINT_MAX, COUNT, column_bounds
from core.outcomes import Outcome
from core.when import COLUMN_MOST, BadDuration, duration_bounds, job_duration
from jobs.lifecycle.resubmits import resubmissions_of, shown_resubmissions
from jobs.lifecycle.retries import attempts_of
from jobs.lifecycle.worst_case import job_estimate, request_estimate
from jobs.models import DataFile, Job, JobArray, JobEvent, LogChunk, OutputFile, RuntimeImage, Stage
from jobs.scheduling.queue import standing
from jobs.submit.fields import DEPENDENCY_FIELDS, MAX_MEMORY_FACTOR
from jobs.submit.forms import ArrayForm, JobForm
from pool.models import Hold

if TYPE_CHECKING:
    from drf_spectacular.openapi import AutoSchema


class EstimateSerializer(serializers.Serializer):
    """A job's worst case: its whole request held for as long as the meter may count (its time limit and
    the platform's overhead), at the rate in force."""

    words = serializers.CharField(help_text='as people read it: "0.52 EUR", or "less than 0.01 EUR"')
    amount = serializers.CharField(help_text="rounded half up to the cent")
    exact = serializers.CharField(help_text="exact to 0.000001: what a record of a hold metered to its bound costs")
    currency = serializers.CharField()
    core_hours = serializers.CharField(help_text="held core-hours at worst (rounded up)")
    held_seconds = serializers.IntegerField(
        **COUNT, help_text="the most a hold of the job is metered: time limit + overhead"
    )
    overhead_s = serializers.IntegerField(
        **COUNT, help_text="the platform's part beyond the time limit: the run's start, the kill, output collection, "
        "the release",
    )  # fmt: skip
    rate_id = serializers.IntegerField(
        **column_bounds(Record, "rate_id"), help_text="the rate card row (0: the settings' rates)"
    )


def _bounded(name: str, **kwargs: Any) -> serializers.IntegerField:
    """An integer with the bounds JobForm gives the field of that name (the one validator of requests)."""
    field = JobForm.base_fields[name]
    assert isinstance(field, forms.IntegerField)
    bounds: dict[str, Any] = {"min_value": field.min_value, "max_value": field.max_value}
    return serializers.IntegerField(**bounds, **kwargs)


class DurationSecondsField(serializers.IntegerField):
    """Seconds, or a duration with units, of the job's duration field `duration` (`time_limit_s`), read by
    core.when's one reader within that field's bounds, as the form reads it: a worst case of a time limit
    without one overflowed the decimals of a cost."""

    def __init__(self, *, duration: str, **kwargs: Any) -> None:
        self.duration = duration
        # The column's bound as max_value (what the field can ever take); the setting's is read per value.
        super().__init__(min_value=duration_bounds(duration)[0], max_value=COLUMN_MOST, **kwargs)

    def most(self) -> int:
        """The field's limit (a setting: read as each value is)."""
        return duration_bounds(self.duration)[1]

    def to_internal_value(self, data: Any) -> int:
        try:
            return job_duration(self.duration, data)
        except BadDuration as exc:
            raise serializers.ValidationError(exc.message, code=exc.code) from None


class DurationSecondsSchema(OpenApiSerializerFieldExtension):
    """Seconds or a duration with units, bounded as the form is when the document is made (the setting may change)."""

    target_class = DurationSecondsField

    def map_serializer_field(self, auto_schema: "AutoSchema", direction: Direction) -> dict[str, Any]:
        field = self.target
        assert isinstance(field, DurationSecondsField)
        return {
            "oneOf": [{"type": "integer", "minimum": field.min_value, "maximum": field.most()}, {"type": "string"}],
            "description": "seconds, a duration with units (90s, 90m, 2h, 1h30m, 1d) or as Slurm writes it "
            "(30:00, 1:30:00, 2-12, 2-12:30:00), at most E31_TIME_LIMIT_MAX_S",
        }


class EstimateRequest(serializers.Serializer):
    """The request of a job not submitted yet: what POST /api/v1/jobs/estimate/ (and the form's estimate) take."""

    cpus = _bounded("cpus")
    memory_mb = _bounded("memory_mb")
    gpus = _bounded("gpus", default=0)
    time_limit_s = DurationSecondsField(duration="time_limit_s")
    image = serializers.SlugRelatedField(
        slug_field="name", queryset=RuntimeImage.objects.all(), required=False, allow_null=True, default=None
    )

    def estimate(self, *, now: datetime) -> Estimate:
        d = self.validated_data
        return request_estimate(
            cpus=d["cpus"], memory_mb=d["memory_mb"], gpus=d["gpus"], time_limit_s=d["time_limit_s"],
            image=d["image"], now=now,
        )  # fmt: skip


class LogQuery(serializers.Serializer):
    """GET /api/v1/jobs/{id}/logs/'s query."""

    offset = serializers.IntegerField(
        **column_bounds(LogChunk, "offset", least=0), default=0, help_text="byte offset to read from",
        error_messages={"invalid": "Must be a whole number of bytes."},
    )  # fmt: skip


class DataFileSerializer(serializers.ModelSerializer[DataFile]):
    class Meta:
        model = DataFile
        fields = ["name", "size", "sha256"]


class StandingSerializer(serializers.Serializer):
    """Where a waiting job stands, as the last scheduler pass stored it."""

    position = serializers.IntegerField(**column_bounds(Job, "queue_position", least=1), help_text="1 is next")
    queued = serializers.IntegerField(**COUNT, help_text="jobs waiting in all")
    reason = serializers.CharField(help_text="why it waits")
    expected_start = serializers.DateTimeField(
        allow_null=True,
        help_text="when it is expected to start at the latest: set while the pass reserves compute for it",
    )


class AttemptSerializer(serializers.Serializer):
    """One attempt of a job: how it ended (blank while it runs), with what memory, held when."""

    attempt = serializers.IntegerField(**column_bounds(Job, "attempt", least=1))
    outcome = serializers.CharField()
    exit_code = serializers.IntegerField(**column_bounds(Job, "exit_code"), allow_null=True)
    reason = serializers.CharField()
    memory_mb = serializers.IntegerField(**column_bounds(Hold, "memory_mb"))
    held_at = serializers.DateTimeField(allow_null=True)
    released_at = serializers.DateTimeField(allow_null=True)


class UsageNowSerializer(serializers.Serializer):
    """What the node last sampled of a running job's container (Slurm's sstat); null when it does not run."""

    cpu_percent = serializers.FloatField(
        read_only=True, help_text="cpu time used over the last sample's interval, 100 a core"
    )
    memory_mb = serializers.IntegerField(**column_bounds(Job, "memory_mb"), help_text="memory in use, MB")
    at = serializers.DateTimeField(help_text="when it was sampled")


# What an answer shows of a job's last hold and its record: only these columns are read (a record's
# others cost more to read than the rest of the row).
HOLD_COLUMNS = ["job_id", "held_at", "node__name", "cpu_set", "memory_mb", "gpu_ids", "runtime"]
RECORD_COLUMNS = ["id", "sequence", "held_seconds", "cpu_seconds", "cost", "currency", "outcome", "hash"]


def shown_relations() -> list[Prefetch]:
    """What JobSerializer shows of a job's relations, into lists of their own (`to_attr`): a prefetch into the
    related managers builds a filtered QuerySet per job."""
    columns = HOLD_COLUMNS + [f"record__{column}" for column in RECORD_COLUMNS]
    holds = Hold.objects.select_related("node", "record").only(*columns)
    data_files = Prefetch("data_files", to_attr="shown_data_files")
    chain = [Prefetch("dependencies", to_attr="shown_dependencies"), Prefetch("inputs", to_attr="shown_inputs")]
    holds_shown = Prefetch("holds", queryset=holds, to_attr="shown_holds")
    return [holds_shown, data_files, *chain, shown_resubmissions()]


def with_schedule(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """Each job with the schedule whose run submitted it, or its array (`shown_schedule`: {id, name} or None),
    read in the job's own query through the runs' reverse relations: jobs never imports schedules."""
    made = JSONObject(id="schedule_runs__schedule_id", name="schedule_runs__schedule__name")
    by_job = Job.objects.filter(pk=OuterRef("pk"), schedule_runs__isnull=False).annotate(made=made).values("made")
    arrays = JobArray.objects.filter(pk=OuterRef("array_id"), schedule_runs__isnull=False)
    by_array = arrays.annotate(made=made).values("made")
    found = Coalesce(Subquery(by_job[:1]), Subquery(by_array[:1]), output_field=JSONField())
    return jobs.annotate(shown_schedule=found)


def schedule_of(job: Job) -> dict[str, Any] | None:
    """The schedule that made the job, as with_schedule read it (else read now): {id, name} or None."""
    if not hasattr(job, "shown_schedule"):
        read = with_schedule(Job.objects.filter(pk=job.pk).only("pk")).first()
        job.shown_schedule = getattr(read, "shown_schedule", None)  # type: ignore[attr-defined]
    found: dict[str, Any] | None = getattr(job, "shown_schedule", None)
    return found


_MOMENT = serializers.DateTimeField()  # DRF's own conversions, used unbound by to_representation
_SECONDS = serializers.DecimalField(max_digits=14, decimal_places=3)
_COST = serializers.DecimalField(max_digits=14, decimal_places=6)


def _when(moment: datetime | None) -> str | None:
    return None if moment is None else _MOMENT.to_representation(moment)


class ScheduleShownSerializer(serializers.Serializer):
    id = serializers.IntegerField(min_value=1, max_value=BIGINT_MAX)  # a schedule's id (schedules is above jobs)
    name = serializers.CharField()


# A job as every answer of the API shows it. The declared fields are its OpenAPI schema (a docstring would be
# its description), and to_representation gives their values in plain code, as healthchecks' Check.to_dict()
# does: DRF's fields per row and per row's hold and record are most of a list page's time. Its context:
# `book`, the rate card read once for a list's rows; `explain`, a single job's place in the queue.
class JobSerializer(serializers.ModelSerializer[Job]):
    team = serializers.CharField(read_only=True)
    image = serializers.CharField(read_only=True)
    request = serializers.DictField(read_only=True)
    # The serializer's metaclass takes declared fields out of the class, so .data stays the rendered
    # job; the stubs see this field as the class attribute Serializer.data.
    data = DataFileSerializer(many=True, read_only=True)  # type: ignore[assignment]
    outputs = serializers.ListField(child=serializers.CharField(), read_only=True)
    cancelled_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    queue = serializers.CharField(
        read_only=True, allow_null=True, help_text="the queue's name (null: made before queues, served as the default)"
    )
    constraint = serializers.CharField(read_only=True, help_text="the node features it needs; empty: any node")
    preemptable = serializers.BooleanField(
        read_only=True,
        help_text="whether a higher queue's job may still preempt it: not when it opted out, when its queue's jobs "
        "are not preemptable, or once it has been preempted E31_MAX_PREEMPTIONS times",
    )
    standing = StandingSerializer(read_only=True, allow_null=True, help_text="while it waits: its place and why")
    hold = serializers.DictField(read_only=True, allow_null=True)
    record = serializers.DictField(read_only=True, allow_null=True)
    estimated_cost = EstimateSerializer(read_only=True)  # at the rate of its RENT (now, while it waits)
    usage_now = UsageNowSerializer(read_only=True, allow_null=True)
    array = serializers.UUIDField(read_only=True, allow_null=True, help_text="the array it is a task of")
    after_ok = serializers.ListField(child=serializers.UUIDField(), read_only=True)
    after_any = serializers.ListField(child=serializers.UUIDField(), read_only=True)
    after_not_ok = serializers.ListField(child=serializers.UUIDField(), read_only=True)
    inputs_from = serializers.ListField(child=serializers.CharField(), read_only=True, help_text="<job id>:<glob>")
    attempts = AttemptSerializer(many=True, read_only=True)
    preempted_by = serializers.UUIDField(
        read_only=True, allow_null=True, help_text="the job of a higher queue its node is stopping it for"
    )
    schedule = ScheduleShownSerializer(read_only=True, allow_null=True, help_text="the schedule whose run submitted it")
    resubmitted_from = serializers.UUIDField(
        read_only=True, allow_null=True, help_text="the earlier job it submits again (POST /api/v1/jobs/{id}/resubmit/)"
    )
    resubmissions = serializers.ListField(
        child=serializers.UUIDField(), read_only=True,
        help_text="the jobs of its team that submit it again, oldest first",
    )  # fmt: skip

    class Meta:
        model = Job
        fields = [
            "id", "name", "team", "image", "command", "env", "request", "data", "outputs", "max_retries", "isolation",
            "retry_on", "retry_memory_factor", "retry_delay_s", "array", "array_index",
            "after_ok", "after_any", "after_not_ok", "inputs_from", "wait_reason", "attempt", "attempts",
            "preemptions", "preempted_by",
            "stage", "outcome", "exit_code", "reason", "failure_excerpt", "cancel_requested", "cancelled_by",
            "queue", "constraint", "preemptable", "standing",
            "submitted_at", "held_at", "started_at", "finished_at", "released_at", "usage_now",
            "hold", "record", "estimated_cost", "files_deleted_at", "pinned_until", "schedule",
            "resubmitted_from", "resubmissions",
        ]  # fmt: skip
        extra_kwargs = {"retry_memory_factor": {"min_value": 1, "max_value": MAX_MEMORY_FACTOR}}  # as JobForm's

    def to_representation(self, job: Job) -> dict[str, Any]:
        """`job` as JobViewSet.get_queryset loads it, or as jobs.submit.service.submit made it."""
        hold = max(job.shown_holds, key=lambda h: h.held_at, default=None)
        record = getattr(hold, "record", None) if hold else None
        estimate = job.submitted_estimate or job_estimate(job, now=timezone.now(), book=self.context.get("book"))
        found = standing(job) if self.context.get("explain") else None
        return {
            "id": str(job.id), "name": job.name, "team": job.team.slug, "image": job.image.name,
            "command": job.command, "env": job.env, "request": {
                "cpus": job.cpus, "memory_mb": job.memory_mb, "gpus": job.gpus, "time_limit_s": job.time_limit_s,
            },
            "data": [{"name": f.name, "size": f.size, "sha256": f.sha256} for f in job.data_files_by_name],
            "outputs": job.output_patterns, "max_retries": job.max_retries, "isolation": job.isolation,
            "retry_on": job.retry_on, "retry_memory_factor": job.retry_memory_factor,
            "retry_delay_s": job.retry_delay_s, "array": str(job.array_id) if job.array_id else None,
            "array_index": job.array_index, **_chain(job), "wait_reason": job.wait_reason,
            "attempt": job.attempt, "attempts": attempts_of(job), "preemptions": job.preemptions,
            "preempted_by": str(job.preempted_by_id) if job.preempted_by_id else None,
            "stage": job.stage, "outcome": job.outcome, "exit_code": job.exit_code,
            "reason": job.reason, "failure_excerpt": job.failure_excerpt, "cancel_requested": job.cancel_requested,
            "cancelled_by": job.cancelled_by.username if job.cancelled_by else None,
            "queue": job.queue.name if job.queue else None, "constraint": job.constraint,
            "preemptable": not job.not_preemptable, "standing": StandingSerializer(found).data if found else None,
            "submitted_at": _when(job.submitted_at), "held_at": _when(job.held_at), "started_at": _when(job.started_at),
            "finished_at": _when(job.finished_at), "released_at": _when(job.released_at),
            "usage_now": job.usage_now if job.stage == Stage.RUN else None,
            "hold": None if hold is None else {
                "node": hold.node.name, "cpu_set": hold.cpu_set, "memory_mb": hold.memory_mb, "gpus": hold.gpu_ids,
                "runtime": hold.runtime,
            },
            "record": None if record is None else {
                "id": str(record.id), "sequence": record.sequence,
                "held_seconds": _SECONDS.to_representation(record.held_seconds),
                "cpu_seconds": _SECONDS.to_representation(record.cpu_seconds),
                "cost": _COST.to_representation(record.cost),
                "currency": record.currency, "outcome": record.outcome, "hash": record.hash,
            },
            "estimated_cost": estimate.as_dict(),
            "files_deleted_at": _when(job.files_deleted_at), "pinned_until": _when(job.pinned_until),
            "schedule": schedule_of(job),
            "resubmitted_from": str(job.resubmitted_from_id) if job.resubmitted_from_id else None,
            "resubmissions": [str(r.pk) for r in resubmissions_of(job)],
        }  # fmt: skip


def _chain(job: Job) -> dict[str, list[str]]:
    """What the job waits for and reads, as it declared them (prefetched by shown_relations, or set by its submit)."""
    dependencies = getattr(job, "shown_dependencies", None)
    inputs = getattr(job, "shown_inputs", None)
    if dependencies is None or inputs is None:
        dependencies, inputs = list(job.dependencies.all()), list(job.inputs.all())
    kinds = DEPENDENCY_FIELDS.items()
    found = {name: [str(d.upstream_id) for d in dependencies if d.kind == kind] for name, kind in kinds}
    return {**found, "inputs_from": [f"{i.from_job_id}:{i.glob}" for i in inputs]}


class OutputFileSerializer(serializers.ModelSerializer[OutputFile]):
    class Meta:
        model = OutputFile
        fields = ["path", "size", "sha256"]


class JobEventSerializer(serializers.ModelSerializer[JobEvent]):
    # Blank until the event that ends the job: declared, since DRF drops a read-only model field's allow_blank,
    # and the document would then refuse the blank every submit, rent and run event has.
    outcome = serializers.ChoiceField(choices=Outcome.choices, allow_blank=True, read_only=True)

    class Meta:
        model = JobEvent
        fields = ["at", "stage", "outcome", "attempt", "actor", "reason"]
        read_only_fields = fields


class JobSubmission:
    """The body of POST /api/v1/jobs/ in the OpenAPI document (see submission_schema)."""


class JobResubmission:
    """The body of POST /api/v1/jobs/{id}/resubmit/: a submission's fields, each optional (what is left out is
    the earlier job's), and which of its data files to stage again."""


class ArraySubmission:
    """The body of POST /api/v1/arrays/: a job's, and the array's indices."""


def submission_schema(form: type[JobForm] = JobForm, *, beside: type[JobForm] | None = None) -> dict:
    """The body of a submission in OpenAPI terms, as the form's fields say it (each its own `schema`);
    with `beside`, only the fields that form lacks."""
    maxima = form.maxima()
    properties, required = {}, []
    for name, field in form.base_fields.items():
        if beside is not None and name in beside.base_fields:
            continue
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
    target_class: type = JobSubmission
    form = JobForm

    def get_name(self, auto_schema: "AutoSchema", direction: Direction) -> str:
        return self.target_class.__name__

    def map_serializer(self, auto_schema: "AutoSchema", direction: Direction) -> dict[str, Any]:
        return submission_schema(self.form)  # at each generation of the document, so the settings' limits hold


class JobResubmissionExtension(JobSubmissionExtension):
    """A submission's fields, none required, and `reuse` (the form adds it for a resubmit alone)."""

    target_class = JobResubmission

    def map_serializer(self, auto_schema: "AutoSchema", direction: Direction) -> dict[str, Any]:
        schema = submission_schema(self.form)
        schema["properties"]["reuse"] = {
            "type": "array", "items": {"type": "string"}, "title": "Data files of the earlier job",
            "description": "The names of its data files staged again from the store; left out: every one. A file "
            "sent under data by the same name replaces it.",
        }  # fmt: skip
        return {"type": "object", "properties": schema["properties"]}


class ArraySubmissionExtension(JobSubmissionExtension):
    """A job's submission and the array's own fields (so a job's fields, their enums too, are said once)."""

    target_class = ArraySubmission
    form = ArrayForm

    def map_serializer(self, auto_schema: "AutoSchema", direction: Direction) -> dict[str, Any]:
        own = submission_schema(ArrayForm, beside=JobForm)
        return {"allOf": [{"$ref": "#/components/schemas/JobSubmission"}, own]}
