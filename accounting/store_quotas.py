"""Storage quotas: what a team may keep in the store, and the check before files land there. A file counts at
its apparent size in whole blocks: a sparse file's holes are written out when it is copied into the store."""

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import BigIntegerField, F, Value
from django.db.models.expressions import CombinedExpression, ExpressionWrapper
from django.db.models.functions import Greatest

from accounting.models import StoreQuota
from core.refusals import Refused
from teams.models import Team

BLOCK = 4096  # the store's allocation unit: what a file system gives a file per started block
MB = 1024 * 1024


def stored_bytes(size: int) -> int:
    return max(1, -(-size // BLOCK)) * BLOCK


def stored_bytes_expression(field: str) -> ExpressionWrapper:
    blocks: CombinedExpression = (F(field) + Value(BLOCK - 1)) / Value(BLOCK)
    return ExpressionWrapper(Greatest(blocks, Value(1)) * Value(BLOCK), output_field=BigIntegerField())


def quota_of(team: Team, *, now: datetime) -> int:
    in_force = StoreQuota.objects.filter(team=team, effective_from__lte=now).order_by("-effective_from")
    quota = in_force.values_list("quota_bytes", flat=True).first()
    return settings.E31_TEAM_STORE_QUOTA_BYTES if quota is None else quota


def quotas_of(teams: list[Team], *, now: datetime) -> dict[int, int]:
    found: dict[int, int] = {}
    rows = StoreQuota.objects.filter(team__in=teams, effective_from__lte=now).order_by("team_id", "-effective_from")
    for team_id, quota in rows.values_list("team_id", "quota_bytes"):
        found.setdefault(team_id, quota)
    return {team.pk: found.get(team.pk, settings.E31_TEAM_STORE_QUOTA_BYTES) for team in teams}


def megabytes(value: int) -> str:
    return f"{value / MB:.1f} MB"


@dataclass(frozen=True)
class StoreStanding:
    team: str
    used: int
    quota: int

    @property
    def free(self) -> int:
        return max(0, self.quota - self.used)

    @property
    def percent(self) -> int:
        return round(100 * self.used / self.quota) if self.quota else 100

    def as_dict(self) -> dict[str, str | int]:
        return {"team": self.team, "store_used_bytes": self.used, "store_quota_bytes": self.quota}


class OverQuota(Refused):
    status, field = 413, "data"

    def __init__(self, standing: StoreStanding, *, adding: int, files: int, kind: str = "outputs") -> None:
        self.standing, self.adding, self.files, self.kind = standing, adding, files, kind
        super().__init__(self.explanation())

    def explanation(self) -> str:
        s = self.standing
        total = s.used + self.adding
        outcome, remedy = {
            "data files": ("so the job was not submitted", "send fewer or smaller data files"),
            "template files": (
                "so the template keeps none of them",
                "remove files the team's templates no longer need",
            ),
        }.get(self.kind, ("so none was kept", "write fewer or smaller outputs"))
        return (
            f"over the store quota of team {s.team}: it may keep {megabytes(s.quota)} ({s.quota} bytes) in the "
            f"store and holds {megabytes(s.used)} ({s.used} bytes); these {self.files} {self.kind} would add "
            f"{megabytes(self.adding)} ({self.adding} bytes, counted at their apparent size in {BLOCK}-byte "
            f"blocks), {total - s.quota} bytes past the quota, {outcome}. Ask an operator for a larger "
            f"quota, or {remedy}"
        )


def check(standing: StoreStanding, *, adding: int, files: int, kind: str = "outputs") -> None:
    """Adding nothing never refuses, so a team put past its quota still runs jobs that keep no files."""
    if adding and standing.used + adding > standing.quota:
        raise OverQuota(standing, adding=adding, files=files, kind=kind)
