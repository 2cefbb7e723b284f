import uuid
from typing import Any, NoReturn

from django.db import models

from core.outcomes import Outcome


class ImmutableRecordError(Exception):
    pass


class RecordQuerySet(models.QuerySet["Record"]):
    def update(self, **kwargs: Any) -> NoReturn:
        raise ImmutableRecordError("accounting records cannot be changed")

    def delete(self) -> NoReturn:
        raise ImmutableRecordError("accounting records cannot be deleted")


class Record(models.Model):
    """What was held for one attempt of one job, for how long, and how it ended. Written once."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    hold = models.OneToOneField("pool.Hold", on_delete=models.PROTECT, related_name="record")
    job = models.ForeignKey("jobs.Job", on_delete=models.PROTECT, related_name="records")
    team = models.ForeignKey("teams.Team", on_delete=models.PROTECT, related_name="records")
    node = models.CharField(max_length=100)
    cpu_set = models.JSONField()
    cpus = models.PositiveSmallIntegerField()
    memory_mb = models.PositiveIntegerField()
    gpus = models.PositiveSmallIntegerField()
    gpu_ids = models.JSONField(default=list)
    held_at = models.DateTimeField()
    released_at = models.DateTimeField()
    held_seconds = models.DecimalField(max_digits=14, decimal_places=3)
    cpu_seconds = models.DecimalField(max_digits=14, decimal_places=3)
    memory_peak_mb = models.PositiveIntegerField(null=True, blank=True)
    cost = models.DecimalField(max_digits=14, decimal_places=6)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    sequence = models.PositiveBigIntegerField(unique=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    objects = RecordQuerySet.as_manager()

    class Meta:
        ordering = ["-sequence"]
        # Usage over time (/usage/, /operator/): a team's records, or everyone's, by release time.
        indexes = [
            models.Index(
                fields=["team", "released_at"],
                include=["cpus", "held_seconds", "cpu_seconds", "cost"],
                name="record_team_released",
            ),
            # Covering: the operator panel's sums over the last 30 days and its utilisation chart read the
            # index alone (an index-only scan), not the wide rows with their hashes.
            models.Index(
                fields=["released_at"],
                include=["team", "held_at", "cpus", "held_seconds", "cost"],
                name="record_released",
            ),
        ]

    def __str__(self) -> str:
        return f"record {self.sequence} for job {self.job_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ImmutableRecordError("accounting records cannot be changed")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise ImmutableRecordError("accounting records cannot be deleted")


class Ledger(models.Model):
    """One row whose lock orders the records: each record's hash covers the previous one."""

    last_sequence = models.PositiveBigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, default="0" * 64)


class TeamUsage(models.Model):
    """A team's recent usage for fair-share: held core-seconds, decayed with a half-life.

    Kept as (value, as_of) and updated with each record, so a scheduler pass reads one row per team.
    """

    team = models.OneToOneField("teams.Team", on_delete=models.CASCADE, primary_key=True, related_name="usage")
    core_seconds = models.FloatField(default=0.0)
    as_of = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.team_id}: {self.core_seconds:.0f} core-s at {self.as_of:%Y-%m-%d %H:%M}"
