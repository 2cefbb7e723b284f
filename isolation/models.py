"""The isolation probes' rounds and results: when each boundary was last shown to hold on each node."""

from django.db import models

from core.formats import moment


class Verdict(models.TextChoices):
    PENDING = "pending"  # its job has not been released yet
    PASSED = "passed"
    FAILED = "failed"
    INCONCLUSIVE = "inconclusive"  # the probe did not run as one (cancelled, node lost, no decoy beside it)


class ProbeRound(models.Model):
    """Every probe, run once on one node under one container runtime (isolation.checks.start_round)."""

    node = models.ForeignKey("pool.Node", on_delete=models.CASCADE, related_name="probe_rounds")
    runtime = models.CharField(max_length=32)
    trigger = models.CharField(max_length=32, help_text="what started it: start, daily, command, test")
    started_at = models.DateTimeField()
    judged_at = models.DateTimeField(null=True, blank=True)
    decoy = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    decoy_secret = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"probes on {self.node} under {self.runtime} at {moment(self.started_at)}"


class ProbeResult(models.Model):
    """One probe of a round: its job, and once judged, the verdict with its evidence."""

    round = models.ForeignKey(ProbeRound, on_delete=models.CASCADE, related_name="results")
    probe = models.CharField(max_length=32)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    verdict = models.CharField(max_length=16, choices=Verdict.choices, default=Verdict.PENDING)
    evidence = models.TextField(blank=True, default="")
    at = models.DateTimeField(null=True, blank=True, help_text="when it was judged")

    class Meta:
        ordering = ["round", "id"]
        # The operator panel's count of the probes judged in the last day, as rounds pile up daily.
        indexes = [models.Index(fields=["at"], name="probe_result_at")]
        constraints = [models.UniqueConstraint(fields=["round", "probe"], name="one_result_per_probe_and_round")]

    def __str__(self) -> str:
        return f"{self.probe}: {self.verdict}"
