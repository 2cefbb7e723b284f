"""Reports over the records: who held what, grouped by day, team or node."""

from datetime import datetime

from django.db.models import Count, F, QuerySet, Sum
from django.db.models.functions import TruncDate

from accounting.models import Record
from teams.access import AnyUser
from teams.models import Team

GROUPS = {"day": TruncDate("released_at"), "team": F("team__slug"), "node": F("node")}


def records_for(user: AnyUser, *, teams: QuerySet[Team]) -> QuerySet[Record]:
    return Record.objects.all() if user.is_staff else Record.objects.filter(team__in=teams)


def usage(
    records: QuerySet[Record], *, group_by: str, since: datetime | None = None, until: datetime | None = None
) -> list[dict]:
    if since:
        records = records.filter(released_at__gte=since)
    if until:
        records = records.filter(released_at__lt=until)
    rows = (
        records.annotate(group=GROUPS[group_by])
        .values("group")
        .annotate(
            jobs=Count("job", distinct=True),
            records=Count("id"),
            held_seconds=Sum("held_seconds"),
            cpu_seconds=Sum("cpu_seconds"),
            cost=Sum("cost"),
        )
        .order_by("group")
    )
    return [{group_by: str(row.pop("group")), **row} for row in rows]
