"""A job name's run history (Airflow's grid): the last released runs of the same-named jobs of a team, each
with its outcome, run time and cost, for the strip on the job page and on each card of the review."""

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import connection
from django.db.models import F, OuterRef, Subquery, Sum, Window
from django.db.models.functions import RowNumber

from accounting.models import Record
from core import formats
from jobs.models import Job, Stage

STRIP_LENGTH = 30

Key = tuple[int, str]  # a team's id and a job name


@dataclass(frozen=True)
class Run:
    """One released run of a strip."""

    id: uuid.UUID
    outcome: str
    started_at: datetime | None
    finished_at: datetime | None
    released_at: datetime
    cost: Decimal | None  # its records' sum; None when it was never held

    @property
    def outcome_label(self) -> str:
        return formats.outcome_label(self.outcome)

    @property
    def run_time(self) -> timedelta | None:
        return self.finished_at - self.started_at if self.started_at and self.finished_at else None


# For each (team, name): its last runs by release, walked in index order (job_team_name_released) and cut
# at the strip's length, then each run's cost summed from its records. A LATERAL join, which the ORM does
# not write, so a name run ten thousand times reads thirty rows, not ten thousand. The stage is written in
# the text, not bound, so the planner can match the partial index at any binding.
STRIPS_SQL = f"""
SELECT k.team_id, k.name, r.id, r.outcome, r.started_at, r.finished_at, r.released_at, c.cost
FROM unnest(%s::bigint[], %s::text[]) AS k(team_id, name)
CROSS JOIN LATERAL (
    SELECT j.id, j.outcome, j.started_at, j.finished_at, j.released_at
    FROM {Job._meta.db_table} j
    WHERE j.team_id = k.team_id AND j.name = k.name AND j.stage = '{Stage.RELEASE.value}'
    ORDER BY j.released_at DESC
    LIMIT %s
) r
LEFT JOIN LATERAL (
    SELECT sum(rec.cost) AS cost FROM {Record._meta.db_table} rec WHERE rec.job_id = r.id
) c ON true
"""


def strips(keys: Iterable[Key], *, length: int = STRIP_LENGTH) -> dict[Key, list[Run]]:
    """The last `length` released runs of each (team id, name), oldest first, in one query."""
    wanted = sorted(set(keys))
    found: dict[Key, list[Run]] = {key: [] for key in wanted}
    if not wanted:
        return found
    rows = _lateral(wanted, length) if connection.vendor == "postgresql" else _ranked(wanted, length)
    for team_id, name, *run in rows:
        if (team_id, name) in found:
            found[(team_id, name)].append(Run(*run))
    for runs in found.values():
        runs.sort(key=lambda run: (run.released_at, str(run.id)))
    return found


def _lateral(wanted: list[Key], length: int) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(STRIPS_SQL, [[t for t, _ in wanted], [n for _, n in wanted], length])
        return cursor.fetchall()


def _ranked(wanted: list[Key], length: int) -> list[tuple]:
    """The same rows where there is no LATERAL (SQLite, the local default): each name's runs ranked by a
    window, which reads every run of the names asked for, as a small local database can afford."""
    cost = Record.objects.filter(job=OuterRef("pk")).order_by().values("job").annotate(total=Sum("cost"))
    ranked = (
        Job.objects.ended()
        .filter(team_id__in={t for t, _ in wanted}, name__in={n for _, n in wanted})
        .annotate(
            rank=Window(RowNumber(), partition_by=[F("team_id"), F("name")], order_by=F("released_at").desc()),
            cost=Subquery(cost.values("total")),
        )
    )
    columns = ["team_id", "name", "id", "outcome", "started_at", "finished_at", "released_at", "cost"]
    return list(ranked.filter(rank__lte=length).values_list(*columns))


def strip_of(job: Job, *, length: int = STRIP_LENGTH) -> list[Run]:
    """The strip of one job's name in its team."""
    return strips([(job.team_id, job.name)], length=length)[(job.team_id, job.name)]
