from rest_framework import serializers

from jobs.models import Job, OutputFile
from jobs.queue import standing


class HoldSerializer(serializers.Serializer):
    node = serializers.CharField(source="node.name")
    cpu_set = serializers.ListField(child=serializers.IntegerField())
    memory_mb = serializers.IntegerField()
    gpus = serializers.ListField(child=serializers.CharField(), source="gpu_ids")


class RecordSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    sequence = serializers.IntegerField()
    held_seconds = serializers.DecimalField(max_digits=14, decimal_places=3)
    cpu_seconds = serializers.DecimalField(max_digits=14, decimal_places=3)
    cost = serializers.DecimalField(max_digits=14, decimal_places=6)
    outcome = serializers.CharField()
    hash = serializers.CharField()


class JobSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    image = serializers.SlugRelatedField(slug_field="name", read_only=True)
    request = serializers.SerializerMethodField()
    outputs = serializers.ListField(source="output_patterns", child=serializers.CharField(), read_only=True)
    hold = serializers.SerializerMethodField()
    record = serializers.SerializerMethodField()
    queue = serializers.SerializerMethodField()
    cancelled_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Job
        fields = [
            "id", "name", "team", "image", "command", "env", "request", "outputs", "max_retries", "attempt",
            "stage", "outcome", "exit_code", "reason", "cancel_requested", "cancelled_by", "queue",
            "submitted_at", "held_at", "started_at", "finished_at", "released_at",
            "hold", "record",
        ]  # fmt: skip

    def get_request(self, job) -> dict:
        return {"cpus": job.cpus, "memory_mb": job.memory_mb, "gpus": job.gpus, "time_limit_s": job.time_limit_s}

    def _last_hold(self, job):
        holds = list(job.holds.all())  # prefetched by the view
        return max(holds, key=lambda h: h.held_at) if holds else None

    def get_hold(self, job) -> dict | None:
        hold = self._last_hold(job)
        return HoldSerializer(hold).data if hold else None

    def get_queue(self, job) -> dict | None:
        """A waiting job's place in the queue and why it waits (on the job's own page only)."""
        if not self.context.get("explain"):
            return None
        return standing(job)

    def get_record(self, job) -> dict | None:
        hold = self._last_hold(job)
        record = getattr(hold, "record", None) if hold else None
        return RecordSummarySerializer(record).data if record else None


class OutputFileSerializer(serializers.ModelSerializer):
    class Meta:
        model = OutputFile
        fields = ["path", "size", "sha256"]


class JobSubmitSerializer(serializers.Serializer):
    """Documents the multipart body of a submission; validation is jobs.forms.JobForm's."""

    name = serializers.CharField()
    image = serializers.CharField(help_text="a registered runtime image name")
    command = serializers.CharField(help_text="shell-split string or JSON list")
    cpus = serializers.IntegerField(min_value=1)
    memory_mb = serializers.IntegerField(min_value=16)
    gpus = serializers.IntegerField(min_value=0, default=0)
    time_limit_s = serializers.IntegerField(min_value=1)
    max_retries = serializers.IntegerField(min_value=0, default=0)
    outputs = serializers.ListField(child=serializers.CharField(), required=False)
    env = serializers.JSONField(required=False)
    team = serializers.SlugField(required=False)
    data = serializers.ListField(child=serializers.FileField(), required=False)
