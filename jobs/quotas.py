"""A team's store use and its quota: the jobs side of accounting.store_quotas.

What counts is what the store holds for the team's jobs whose files retention has not deleted: their
staged data (DataFile) and their kept outputs (OutputFile), each file at its apparent size in whole
store blocks (accounting.store_quotas.stored_bytes).
"""

import uuid
from collections.abc import Iterable
from datetime import datetime

from django.db import transaction
from django.db.models import Sum

from accounting import budgets, store_quotas
from accounting.store_quotas import OverQuota, StoreStanding
from jobs.models import DataFile, Job, OutputFile
from teams.models import Team


def store_used(team: Team, *, leaving_out: uuid.UUID | None = None) -> int:
    """The bytes the store holds for the team's jobs (without the outputs of job `leaving_out`)."""
    kept = {"job__team": team, "job__files_deleted_at__isnull": True}
    data = DataFile.objects.filter(**kept).aggregate(total=Sum(store_quotas.stored_bytes_expression("size")))
    outputs = OutputFile.objects.filter(**kept)
    if leaving_out is not None:
        outputs = outputs.exclude(job_id=leaving_out)
    output_total = outputs.aggregate(total=Sum(store_quotas.stored_bytes_expression("size")))
    return (data["total"] or 0) + (output_total["total"] or 0)


def store_standing(team: Team, *, now: datetime, leaving_out: uuid.UUID | None = None) -> StoreStanding:
    used = store_used(team, leaving_out=leaving_out)
    return StoreStanding(team.slug, used, store_quotas.quota_of(team, now=now))


def store_standings(teams: Iterable[Team], *, now: datetime) -> list[StoreStanding]:
    """Each team's standing (the usage page and API), in slug order: three queries for any number of teams."""
    listed = sorted(teams, key=lambda t: t.slug)
    kept = {"job__team__in": listed, "job__files_deleted_at__isnull": True}
    sums = [
        model.objects.filter(**kept)
        .order_by()
        .values("job__team_id")
        .annotate(total=Sum(store_quotas.stored_bytes_expression("size")))
        .values_list("job__team_id", "total")
        for model in (DataFile, OutputFile)
    ]
    used: dict[int, int] = {}
    for team_id, total in sums[0].union(sums[1], all=True):  # one query for both
        used[team_id] = used.get(team_id, 0) + (total or 0)
    quota = store_quotas.quotas_of(listed, now=now)
    return [StoreStanding(team.slug, used.get(team.pk, 0), quota[team.pk]) for team in listed]


@transaction.atomic
def keep_outputs(job: Job, rows: list[OutputFile], *, now: datetime) -> OverQuota | None:
    """Make `rows` the job's outputs if its team's store has room for them; otherwise the job keeps
    none, and the refusal is returned.

    1. Take the team's row lock: collections (and other quota checks) of one team go one by one.
    2. Its use, leaving out this job's earlier rows (a collection done again replaces them).
    3. Check the rows' stored bytes against the quota.
    4. Keep the rows, committed before their files are copied: a second collection of the team
       counts them at once, and no lock is held while files are copied.
    """
    budgets.lock_team(job.team)
    standing = store_standing(job.team, now=now, leaving_out=job.pk)
    OutputFile.objects.filter(job=job).delete()  # those of a collection cut off before its release
    try:
        store_quotas.check(standing, adding=sum(store_quotas.stored_bytes(row.size) for row in rows), files=len(rows))
    except OverQuota as refused:
        return refused
    OutputFile.objects.bulk_create(rows)
    return None


def check_staged(team: Team, sizes: list[int], *, now: datetime) -> None:
    """Raise OverQuota when data files of `sizes` bytes would take the team's store past its quota.

    The caller holds the team's row lock until the DataFile rows are saved (jobs.submission.submit), so
    two submissions of one team cannot both pass on the same headroom.
    Staged data is checked here, not only counted: unchecked, a job sent with 1 GiB of data and
    cancelled at once would keep it in the store, for nothing, until retention.
    """
    if not sizes:
        return
    adding = sum(store_quotas.stored_bytes(size) for size in sizes)
    store_quotas.check(store_standing(team, now=now), adding=adding, files=len(sizes), kind="data files")
