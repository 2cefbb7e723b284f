"""A team's store use against its quota (accounting.store_quotas): the staged data and kept outputs of
its jobs whose files retention has not deleted, and its stored blobs (the data its templates and their
runs name: counted once, not per run), each in whole store blocks."""

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet, Sum

from accounting import budgets, store_quotas
from accounting.store_quotas import OverQuota, StoreStanding
from jobs.models import DataFile, Job, OutputFile, StoredBlob
from teams.models import Team


def _stored(teams: list[Team], *, leaving_out: uuid.UUID | None) -> list[tuple[QuerySet[Any], str, Sum]]:
    """What the store holds for `teams`, as (rows, the column of their team, the sum of their bytes): their
    jobs' staged data not in a blob and kept outputs (without the outputs of job `leaving_out`), and their
    blobs."""
    kept = {"job__team__in": teams, "job__files_deleted_at__isnull": True}
    size = store_quotas.stored_bytes_expression("size")
    kept_outputs = OutputFile.objects.filter(**kept)
    if leaving_out is not None:
        kept_outputs = kept_outputs.exclude(job_id=leaving_out)
    return [
        # The blob's test is the sum's FILTER, not the WHERE: a WHERE on blob_id lets the planner of a table it
        # has no statistics of yet start from the blob_id index and walk the team's jobs once per file.
        (DataFile.objects.filter(**kept), "job__team_id", Sum(size, filter=Q(blob__isnull=True))),
        (kept_outputs, "job__team_id", Sum(size)),
        (StoredBlob.objects.filter(team__in=teams, present=True), "team_id", Sum(size)),
    ]


def _sums(teams: list[Team], *, leaving_out: uuid.UUID | None = None) -> QuerySet[Any, tuple[int, int | None]]:
    """The query of the bytes the store holds for each of `teams` (lazy, as every query): (team, bytes) rows."""
    data, outputs, blobs = (
        rows.order_by().values(team).annotate(total=total).values_list(team, "total")
        for rows, team, total in _stored(teams, leaving_out=leaving_out)
    )
    return data.union(outputs, blobs, all=True)


def _used_by_team(teams: list[Team], *, leaving_out: uuid.UUID | None = None) -> dict[int, int]:
    """The bytes the store holds for each team, in one query."""
    return _folded(_sums(teams, leaving_out=leaving_out))


def _folded(sums: Iterable[tuple[int, int | None]]) -> dict[int, int]:
    used: dict[int, int] = {}
    for team_id, bytes_ in sums:
        used[team_id] = used.get(team_id, 0) + (bytes_ or 0)
    return used


def store_used(team: Team, *, leaving_out: uuid.UUID | None = None) -> int:
    """The bytes the store holds for the team (without the outputs of job `leaving_out`)."""
    return _used_by_team([team], leaving_out=leaving_out).get(team.pk, 0)


def store_standing(team: Team, *, now: datetime, leaving_out: uuid.UUID | None = None) -> StoreStanding:
    used = store_used(team, leaving_out=leaving_out)
    return StoreStanding(team.slug, used, store_quotas.quota_of(team, now=now))


def store_standings(teams: Iterable[Team], *, now: datetime) -> list[StoreStanding]:
    """Each team's standing (the usage page and API), in slug order: two queries for any number of teams."""
    listed = sorted(teams, key=lambda t: t.slug)
    used = _used_by_team(listed)
    quota = store_quotas.quotas_of(listed, now=now)
    return [StoreStanding(team.slug, used.get(team.pk, 0), quota[team.pk]) for team in listed]


@transaction.atomic
def keep_outputs(job: Job, rows: list[OutputFile], *, now: datetime) -> OverQuota | None:
    """Make `rows` the job's outputs if its team's store has room for them, under the team's row lock
    so two collections cannot pass on the same headroom; otherwise keep none and return the refusal.
    The job's earlier rows (of a collection done again) are replaced, not counted."""
    if not rows:  # adding nothing never passes the quota: no headroom to guard, nor the store to read
        OutputFile.objects.filter(job=job).delete()
        return None
    budgets.lock_team(job.team)
    standing = store_standing(job.team, now=now, leaving_out=job.pk)
    OutputFile.objects.filter(job=job).delete()  # those of a collection cut off before its release
    try:
        store_quotas.check(standing, adding=sum(store_quotas.stored_bytes(row.size) for row in rows), files=len(rows))
    except OverQuota as refused:
        return refused
    OutputFile.objects.bulk_create(rows)
    return None


class StagedData:
    """The store quota's check of a submission's own data files (of `sizes` bytes), in two steps, so that the
    team's row lock, which every submission of the team waits for, is held for as little work as can be:
    made before the lock (the quota in force read, the sum's query built but not run), `check`ed under it."""

    def __init__(self, team: Team, sizes: list[int], *, now: datetime) -> None:
        self.team, self.files = team, len(sizes)
        self.adding = sum(store_quotas.stored_bytes(size) for size in sizes)
        if self.adding:  # adding nothing never passes the quota: neither is read
            # An operator's new quota is not ordered by the team's lock: read before it as under it.
            self.quota = store_quotas.quota_of(team, now=now)
            self.sums = _sums([team])

    def check(self) -> None:
        """Raise OverQuota when the data files would take the team's store past its quota. The caller
        (jobs.submit.service.submit) holds the team's row lock until their DataFile rows are saved: the sum,
        run now, counts those of every submission of the team that held it before."""
        if not self.adding:
            return
        standing = StoreStanding(self.team.slug, _folded(self.sums).get(self.team.pk, 0), self.quota)
        store_quotas.check(standing, adding=self.adding, files=self.files, kind="data files")
