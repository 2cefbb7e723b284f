"""Fair-share: each team's held (not used) core-seconds, decayed: what it held, nobody else could use."""

from datetime import datetime

from django.conf import settings

from accounting.models import TeamUsage


def decay(value: float, *, since: datetime, until: datetime) -> float:
    seconds = (until - since).total_seconds()
    return value * 0.5 ** (seconds / settings.E31_FAIRSHARE_HALF_LIFE_S)


def add_usage(team_id: int, *, core_seconds: float, at: datetime) -> None:
    """The caller holds the ledger lock."""
    usage, created = TeamUsage.objects.select_for_update().get_or_create(
        team_id=team_id, defaults={"core_seconds": core_seconds, "as_of": at}
    )
    if created:
        return
    if at >= usage.as_of:
        usage.core_seconds = decay(usage.core_seconds, since=usage.as_of, until=at) + core_seconds
        usage.as_of = at
    else:  # a record metered up to an earlier moment (a lost node's last heartbeat)
        usage.core_seconds += decay(core_seconds, since=at, until=usage.as_of)
    usage.save(update_fields=["core_seconds", "as_of"])


def usage_now(*, now: datetime) -> dict[int, float]:
    """Teams with none are absent: 0."""
    return {u.team_id: decay(u.core_seconds, since=u.as_of, until=now) for u in TeamUsage.objects.all()}
