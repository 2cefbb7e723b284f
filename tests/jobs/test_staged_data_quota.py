"""Data sent with a submission counts against, and is checked against, its team's store quota."""

import pytest
from django.utils import timezone

from accounting.models import StoreQuota
from accounting.store_quotas import BLOCK, OverQuota
from jobs.models import DataFile, Job
from jobs.storage import quotas
from tests.factories import submit_job, upload
from tests.jobs.test_submission import stored_files

MB = 1024 * 1024
JOBS = "/api/v1/jobs/"


@pytest.fixture
def quota_of_one_mb(team):
    now = timezone.now()
    StoreQuota.objects.create(team=team, effective_from=now, quota_bytes=MB, created_at=now)


def submission(**files: bytes) -> dict:
    return {
        "name": "staged",
        "image": "busybox",
        "command": "true",
        "cpus": "1",
        "memory_mb": "64",
        "time_limit_s": "60",
        "data": [upload(name, content) for name, content in files.items()],
    }


def test_data_that_would_pass_the_quota_is_refused_at_submission(member, team, quota_of_one_mb):
    with pytest.raises(OverQuota) as refused:
        submit_job(member, team, files={"big.bin": b"x" * (MB + 1)})

    assert refused.value.adding == MB + BLOCK and refused.value.kind == "data files"
    assert "the job was not submitted" in refused.value.explanation()
    assert not Job.objects.exists() and not DataFile.objects.exists()


def test_data_counts_with_what_the_team_already_holds(member, team, quota_of_one_mb):
    submit_job(member, team, files={"a.bin": b"x" * (MB // 2)})

    with pytest.raises(OverQuota):
        submit_job(member, team, files={"b.bin": b"x" * (MB // 2 + 1)})

    assert quotas.store_used(team) == MB // 2


def test_data_within_the_quota_and_jobs_without_data_are_accepted(member, team, quota_of_one_mb):
    submit_job(member, team, files={"a.bin": b"x" * MB})

    assert submit_job(member, team).pk  # nothing to add: a team at its quota still submits


def test_api_answers_413_for_data_over_the_quota_and_stores_nothing(api, image, team, quota_of_one_mb):
    response = api.post(JOBS, submission(**{"big.bin": b"x" * (MB + 1)}), format="multipart")

    assert response.status_code == 413, response.content
    assert "over the store quota of team red" in response.json()["detail"]
    assert not Job.objects.exists() and not DataFile.objects.exists()
    assert stored_files() == [], "the files reached the store before the check: refused, they are removed"


def test_submit_form_names_the_quota_under_data(client, member, image, team, quota_of_one_mb):
    client.force_login(member)

    response = client.post("/jobs/new/", submission(**{"big.bin": b"x" * (MB + 1)}))

    assert response.status_code == 413
    assert "over the store quota of team red" in response.content.decode()
    assert not Job.objects.exists()
