"""Storage quotas on the real stack: real jobs in real containers write real sparse files and many
small files under /output; a team's store quota holds, whatever the files cost the job to make."""

import pytest
from django.core.files.storage import default_storage
from django.utils import timezone

from accounting.models import Record, StoreQuota
from jobs.models import Job
from jobs.storage.store import store_prefix
from tests.conftest import wait_for_release

pytestmark = [pytest.mark.docker, pytest.mark.celery]
MB = 1024 * 1024


def set_quota(team, megabytes: int) -> None:
    now = timezone.now()
    StoreQuota.objects.create(team=team, effective_from=now, quota_bytes=megabytes * MB, created_at=now)


def run(api, script: str) -> Job:
    response = api.post(
        "/api/v1/jobs/",
        {"name": "fill", "image": "busybox", "command": f"sh -c '{script}'", "cpus": "1", "memory_mb": "16",
         "time_limit_s": "120"},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    return wait_for_release(Job.objects.get(pk=response.json()["id"]), timeout=180)


def stored_outputs(job: Job) -> list[str]:
    folders, _ = default_storage.listdir(store_prefix(job.pk))
    return default_storage.listdir(f"{store_prefix(job.pk)}/output")[1] if "output" in folders else []


def log_of(api, job: Job) -> str:
    return api.get(f"/api/v1/jobs/{job.pk}/logs/").content.decode()


def test_four_sparse_250_mb_outputs_over_the_quota_fail_the_job_and_never_reach_the_store(stack, api, team):
    set_quota(team, 100)
    sparse = "for i in 1 2 3 4; do dd if=/dev/zero of=/output/big$i bs=1 count=0 seek=250M; done; echo written"

    job = run(api, sparse)

    assert job.outcome == "failed" and job.exit_code == 0
    assert f"over the store quota of team {team.slug}: it may keep 100.0 MB ({100 * MB} bytes)" in job.reason
    assert f"these 4 outputs would add 1000.0 MB ({1000 * MB} bytes" in job.reason
    assert stored_outputs(job) == [] and not job.output_files.exists()
    log = log_of(api, job)
    assert "written" in log and "over the store quota" in log
    assert "sparse outputs, counted and stored at their apparent size: big1 (262144000 bytes, 0 allocated)" in log
    assert Record.objects.filter(job=job).count() == 1
    [store] = api.get("/api/v1/accounting/usage/").json()["store"]
    assert store == {"team": team.slug, "store_used_bytes": 0, "store_quota_bytes": 100 * MB}


def test_many_small_outputs_count_a_store_block_each(stack, api, team):
    set_quota(team, 1)

    job = run(api, "i=0; while [ $i -lt 300 ]; do echo > /output/f$i; i=$((i+1)); done")

    assert job.outcome == "failed"
    assert "these 300 outputs would add 1.2 MB (1228800 bytes" in job.reason
    assert stored_outputs(job) == [] and Record.objects.filter(job=job).count() == 1


def test_outputs_within_the_quota_are_kept_and_counted_until_the_quota_is_reached(stack, api, team):
    set_quota(team, 100)

    kept = run(api, "dd if=/dev/zero of=/output/hole bs=1 count=0 seek=8M")
    over = run(api, "dd if=/dev/zero of=/output/hole bs=1 count=0 seek=95M")

    assert kept.outcome == "succeeded", kept.reason
    assert [(o["path"], o["size"]) for o in api.get(f"/api/v1/jobs/{kept.pk}/outputs/").json()] == [("hole", 8 * MB)]
    assert stored_outputs(kept) == ["hole"] and default_storage.size(f"{store_prefix(kept.pk)}/output/hole") == 8 * MB
    assert over.outcome == "failed" and f"holds 8.0 MB ({8 * MB} bytes)" in over.reason
    assert stored_outputs(over) == []
    [store] = api.get("/api/v1/accounting/usage/").json()["store"]
    assert store["store_used_bytes"] == 8 * MB and store["store_quota_bytes"] == 100 * MB
