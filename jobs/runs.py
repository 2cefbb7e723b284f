"""A job name's run history (Airflow's grid): the last released runs of the same-named jobs of a team, each
with its outcome, run time and cost, for the strip on the job page and on each card of the review."""

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import connection

from accounting.models import Record
from jobs.models import Job, Outcome, Stage

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
        return Outcome(self.outcome).label.lower() if self.outcome in Outcome.values else self.outcome

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
    with connection.cursor() as cursor:
        cursor.execute(STRIPS_SQL, [[t for t, _ in wanted], [n for _, n in wanted], length])
        for team_id, name, *run in cursor.fetchall():
            found[(team_id, name)].append(Run(*run))
    for runs in found.values():
        runs.sort(key=lambda run: (run.released_at, str(run.id)))
    return found


def strip_of(job: Job, *, length: int = STRIP_LENGTH) -> list[Run]:
    """The strip of one job's name in its team."""
    return strips([(job.team_id, job.name)], length=length)[(job.team_id, job.name)]
