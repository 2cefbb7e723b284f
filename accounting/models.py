import uuid
from decimal import Decimal
from typing import Any, NoReturn

from django.conf import settings
from django.db import models
from django.utils import timezone

from core.formats import moment
from core.outcomes import Outcome


class ImmutableRecordError(Exception):
    pass


# A preempted attempt was stopped for a higher queue's job: its record keeps what was held, at cost 0, and
# fair-share and a budget in core-hours do not count it either.
NOT_CHARGED = frozenset({Outcome.PREEMPTED})


def charged(outcome: str) -> bool:
    return outcome not in NOT_CHARGED


class RecordQuerySet(models.QuerySet["Record"]):
    def charged(self) -> "RecordQuerySet":
        return self.exclude(outcome__in=NOT_CHARGED)

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
    # Which columns the hash covers (accounting.chain): layout 1's records keep the later columns NULL.
    layout = models.PositiveSmallIntegerField(null=True, blank=True)
    attempt = models.PositiveSmallIntegerField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    image = models.CharField(max_length=64, null=True, blank=True, help_text="the runtime image's name")
    # The rate in force at RENT (the hold's held_at): which rate card row, and its prices then.
    rate_id = models.PositiveIntegerField(null=True, blank=True, help_text="the RateCard row used (0: the settings')")
    rate_core_hour = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    rate_gb_hour = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    rate_gpu_hour = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    currency = models.CharField(max_length=3, null=True, blank=True)
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
            # Covering, so the operator panel's sums and chart read the index, not the wide rows.
            models.Index(
                fields=["released_at"],
                include=["team", "held_at", "cpus", "held_seconds", "cost"],
                name="record_released",
            ),
        ]

    def __str__(self) -> str:
        return f"record {self.sequence}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ImmutableRecordError("accounting records cannot be changed")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise ImmutableRecordError("accounting records cannot be deleted")

    @property
    def measured(self) -> bool:
        """A node that read no cgroup leaves no cpu time and no peak."""
        return self.memory_peak_mb is not None or self.cpu_seconds > 0

    def cpu_efficiency(self) -> Decimal | None:
        """The one rule: the job page, the mails and the API (4 places) show it."""
        held = self.held_seconds * self.cpus
        if not self.measured or not held:
            return None
        return Decimal(self.cpu_seconds) / held

    def memory_efficiency(self) -> Decimal | None:
        """A job out of memory shows its cgroup's last peak (its page adds that it reached its limit)."""
        if self.memory_peak_mb is None or not self.memory_mb:
            return None
        return Decimal(self.memory_peak_mb) / Decimal(self.memory_mb)


class Ledger(models.Model):
    """One row whose lock orders the records: each record's hash covers the previous one."""

    last_sequence = models.PositiveBigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, default="0" * 64)


class TeamUsage(models.Model):
    """A team's decayed held core-seconds for fair-share, kept per record so a pass reads one row a team."""

    team = models.OneToOneField("teams.Team", on_delete=models.CASCADE, primary_key=True, related_name="usage")
    core_seconds = models.FloatField(default=0.0)
    as_of = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.team_id}: {self.core_seconds:.0f} core-s at {self.as_of:%Y-%m-%d %H:%M}"


class PastRateChangeError(Exception):
    pass


class EffectiveDated(models.Model):
    """A row in force is history, so it can be neither changed nor deleted: a change is a new row."""

    effective_from = models.DateTimeField()
    note = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            stored = type(self)._default_manager.filter(pk=self.pk).values_list("effective_from", flat=True).first()
            if stored is not None and stored <= timezone.now():
                raise PastRateChangeError(f"{self} is in force since {moment(stored)}: add a new row instead")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        if self.effective_from <= timezone.now():
            raise PastRateChangeError(f"{self} has been in force: it stays in the history")
        return super().delete(*args, **kwargs)


class RateCard(EffectiveDated):
    """The prices of held compute from `effective_from` on; a row for a `runtime_image` beats the general one."""

    effective_from = models.DateTimeField(db_index=True)
    runtime_image = models.CharField(
        max_length=64, blank=True, default="", help_text="a runtime image's name; empty: every image"
    )
    core_hour = models.DecimalField(max_digits=14, decimal_places=6, help_text="per held core-hour")
    gb_hour = models.DecimalField(max_digits=14, decimal_places=6, help_text="per held GiB-hour of memory")
    gpu_hour = models.DecimalField(max_digits=14, decimal_places=6, help_text="per held GPU-hour")

    class Meta:
        ordering = ["-effective_from", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["runtime_image", "effective_from"], name="one_rate_per_image_and_instant")
        ]

    def __str__(self) -> str:
        scope = self.runtime_image or "every image"
        return f"rates for {scope} from {moment(self.effective_from)}"


class BudgetUnit(models.TextChoices):
    MONEY = "money", "money (the site's currency)"
    CORE_HOURS = "core_hours", "held core-hours"


class Budget(models.Model):
    """What a team's records of a month plus its unreleased jobs' worst case may reach (accounting.budgets)."""

    team = models.OneToOneField("teams.Team", on_delete=models.CASCADE, primary_key=True, related_name="budget")
    unit = models.CharField(max_length=16, choices=BudgetUnit.choices, default=BudgetUnit.MONEY)
    monthly = models.DecimalField(max_digits=14, decimal_places=2, help_text="per calendar month, in the unit")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.team}: {self.monthly} {self.get_unit_display()} a month"


class BudgetExtension(models.Model):
    team = models.ForeignKey("teams.Team", on_delete=models.PROTECT, related_name="budget_extensions")
    month = models.DateField(help_text="the first day of the month it extends")
    amount = models.DecimalField(max_digits=14, decimal_places=2, help_text="in the budget's unit")
    reason = models.CharField(max_length=300)
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    granted_at = models.DateTimeField()

    class Meta:
        ordering = ["-granted_at"]

    def __str__(self) -> str:
        return f"+{self.amount} for {self.team} in {self.month:%Y-%m}"


class StoreQuota(EffectiveDated):
    """What a team may keep in the store from `effective_from` on (none in force: E31_TEAM_STORE_QUOTA_MB)."""

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="store_quotas")
    quota_bytes = models.PositiveBigIntegerField(help_text="bytes the team's jobs may keep in the store")

    class Meta:
        ordering = ["team", "-effective_from"]
        constraints = [models.UniqueConstraint(fields=["team", "effective_from"], name="one_store_quota_per_instant")]

    def __str__(self) -> str:
        return f"{self.team}: {self.quota_bytes} bytes from {moment(self.effective_from)}"


class LedgerVerification(models.Model):
    """One verify_ledger run, for /metrics; an intact run's head is where the daily check starts next."""

    ran_at = models.DateTimeField()
    ok = models.BooleanField()
    since_sequence = models.PositiveBigIntegerField(default=0, help_text="checked the records after it (0: all)")
    records = models.PositiveBigIntegerField(help_text="records checked")
    head_sequence = models.PositiveBigIntegerField()
    head_hash = models.CharField(max_length=64, blank=True, default="")
    # Keyed like the records, so a row written with the database alone names no head to start from.
    head_mac = models.CharField(max_length=64, blank=True, default="", help_text="HMAC of the head, under the key")
    problem = models.TextField(blank=True, default="")
    seconds = models.FloatField()

    class Meta:
        ordering = ["-ran_at"]
        get_latest_by = "ran_at"

    def __str__(self) -> str:
        return f"{'ok' if self.ok else 'FAILED'} at {moment(self.ran_at)}: {self.records} records"


class BudgetWarning(models.Model):
    """One row per team, month and level, so a warning goes out once however many releases cross it."""

    class Level(models.IntegerChoices):
        NEAR = 80
        REACHED = 100

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="budget_warnings")
    month = models.DateField(help_text="the first day of the month")
    level = models.PositiveSmallIntegerField(choices=Level.choices, help_text="percent of the budget")
    unit = models.CharField(max_length=16, choices=BudgetUnit.choices)
    spent = models.DecimalField(max_digits=20, decimal_places=6, help_text="spent when it was crossed, in the unit")
    limit = models.DecimalField(max_digits=14, decimal_places=2, help_text="the month's budget, extensions included")
    at = models.DateTimeField()

    class Meta:
        ordering = ["-at"]
        constraints = [models.UniqueConstraint(fields=["team", "month", "level"], name="one_budget_warning_per_level")]

    def __str__(self) -> str:
        return f"{self.team_id} at {self.level}% in {self.month:%Y-%m}"
