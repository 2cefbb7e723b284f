"""A team's store use, and outputs kept only within its store quota (jobs.storage.quotas)."""

import threading

import pytest
from django.db import connection
from django.utils import timezone

from accounting.models import StoreQuota
from accounting.store_quotas import BLOCK, OverQuota
from jobs.models import Job, OutputFile
from jobs.storage import quotas
from tests.factories import submit_job

MB = 1024 * 1024


def set_quota(team, megabytes: int) -> None:
    now = timezone.now()
    StoreQuota.objects.create(team=team, effective_from=now, quota_bytes=megabytes * MB, created_at=now)


def outputs(job: Job, *sizes: int) -> list[OutputFile]:
    return [OutputFile(job=job, path=f"out-{n}.bin", size=size, sha256="0" * 64) for n, size in enumerate(sizes)]


def test_store_use_is_staged_data_and_outputs_in_whole_blocks(member, team):
    job = submit_job(member, team, files={"in.csv": "a,b\n"})
    OutputFile.objects.bulk_create(outputs(job, 1, 0, 3 * BLOCK + 1))

    assert quotas.store_used(team) == BLOCK + (BLOCK + BLOCK + 4 * BLOCK)


def test_files_deleted_by_retention_and_other_teams_files_do_not_count(member, team, outsider, other_team):
    gone = submit_job(member, team, files={"in.csv": "x" * 5000})
    OutputFile.objects.bulk_create(outputs(gone, MB))
    Job.objects.filter(pk=gone.pk).update(files_deleted_at=timezone.now())
    theirs = submit_job(outsider, other_team)
    OutputFile.objects.bulk_create(outputs(theirs, MB))

    assert quotas.store_used(team) == 0
    assert quotas.store_used(other_team) == MB


def test_outputs_within_the_quota_are_kept(member, team):
    set_quota(team, 1)
    job = submit_job(member, team)

    refused = quotas.keep_outputs(job, outputs(job, MB // 2, MB // 2), now=timezone.now())

    assert refused is None
    assert sorted(job.output_files.values_list("size", flat=True)) == [MB // 2, MB // 2]


def test_outputs_that_would_pass_the_quota_are_none_of_them_kept(member, team):
    set_quota(team, 1)
    earlier = submit_job(member, team)
    quotas.keep_outputs(earlier, outputs(earlier, MB // 2), now=timezone.now())
    job = submit_job(member, team)

    refused = quotas.keep_outputs(job, outputs(job, MB // 4, MB // 4 + 1), now=timezone.now())

    assert isinstance(refused, OverQuota)
    assert refused.standing.used == MB // 2 and refused.adding == MB // 2 + BLOCK
    assert not job.output_files.exists()
    assert quotas.store_standing(team, now=timezone.now()).used == MB // 2


def test_many_small_outputs_count_a_block_each(member, team):
    set_quota(team, 1)
    job = submit_job(member, team)

    refused = quotas.keep_outputs(job, outputs(job, *[1] * 300), now=timezone.now())

    assert isinstance(refused, OverQuota) and refused.adding == 300 * BLOCK and refused.files == 300


def test_a_collection_done_again_replaces_the_jobs_own_outputs_rather_than_adding_to_them(member, team):
    set_quota(team, 1)
    job = submit_job(member, team)
    quotas.keep_outputs(job, outputs(job, 3 * MB // 4), now=timezone.now())

    again = quotas.keep_outputs(job, outputs(job, 3 * MB // 4), now=timezone.now())

    assert again is None and job.output_files.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_collections_of_one_team_at_once_cannot_both_pass_on_the_same_headroom(member, team):
    if connection.vendor != "postgresql":
        pytest.skip("row locks need PostgreSQL")
    set_quota(team, 1)
    jobs = [submit_job(member, team) for _ in range(4)]
    results: list[OverQuota | None] = []
    start = threading.Barrier(len(jobs))

    def collect(job: Job) -> None:
        try:
            start.wait()
            results.append(quotas.keep_outputs(job, outputs(job, 3 * MB // 4), now=timezone.now()))
        finally:
            connection.close()

    threads = [threading.Thread(target=collect, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert len(results) == 4 and results.count(None) == 1
    assert OutputFile.objects.filter(job__team=team).count() == 1


def test_a_job_with_no_outputs_is_not_refused_when_its_team_is_already_past_its_quota(member, team):
    earlier = submit_job(member, team)
    quotas.keep_outputs(earlier, outputs(earlier, MB), now=timezone.now())
    set_quota(team, 0)  # an operator lowered it below what the team holds
    job = submit_job(member, team)

    assert quotas.keep_outputs(job, [], now=timezone.now()) is None
    assert isinstance(quotas.keep_outputs(job, outputs(job, 1), now=timezone.now()), OverQuota)


def test_a_collection_done_again_with_no_outputs_keeps_none_of_the_first(member, team):
    job = submit_job(member, team)
    quotas.keep_outputs(job, outputs(job, MB // 4), now=timezone.now())

    assert quotas.keep_outputs(job, [], now=timezone.now()) is None
    assert not OutputFile.objects.filter(job=job).exists()
