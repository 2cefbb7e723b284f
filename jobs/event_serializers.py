"""The API's shape of a job's history (jobs.history): one plain ModelSerializer."""

from rest_framework import serializers

from jobs.models import JobEvent


class JobEventSerializer(serializers.ModelSerializer[JobEvent]):
    class Meta:
        model = JobEvent
        fields = ["at", "stage", "outcome", "attempt", "actor", "reason"]
        read_only_fields = fields
