"""SUBMIT: a job and its staged data are made together, or not at all."""

from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.storage import default_storage

from jobs.models import DataFile, Job, Stage
from jobs.storage.store import data_key
from jobs.submit import service as submission
from tests.factories import submit_job


def stored_files() -> list[Path]:
    root = Path(settings.STORAGES["default"]["OPTIONS"]["location"])
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_a_submitted_job_waits_with_its_data_in_the_store(member, team, image):
    job = submit_job(member, team, image=image, files={"train.csv": "a,b\n1,2\n"})

    assert job.stage == Stage.SUBMIT and job.submitted_at is not None
    assert list(job.data_files.values_list("name", "size")) == [("train.csv", 8)]
    with default_storage.open(data_key(job.pk, "train.csv")) as staged:
        assert staged.read() == b"a,b\n1,2\n"


def test_a_failure_while_staging_leaves_no_job_and_no_file(member, team, image, monkeypatch):
    staged = []
    save_upload = submission.save_upload

    def full_disk_on_the_second_file(job_id, name, upload):
        if staged:
            raise OSError(28, "No space left on device")
        staged.append(name)
        return save_upload(job_id, name, upload)

    monkeypatch.setattr(submission, "save_upload", full_disk_on_the_second_file)

    with pytest.raises(OSError):
        submit_job(member, team, image=image, files={"a.csv": "1", "b.csv": "2"})

    assert staged == ["a.csv"], "the first file was stored before the failure"
    assert Job.objects.count() == 0 and DataFile.objects.count() == 0
    assert stored_files() == []


def test_the_same_idempotency_key_returns_the_first_job_and_stages_nothing_again(member, team, image):
    first = submit_job(member, team, image=image, name="nightly", key="nightly", files={"a.csv": "1"})

    again = submit_job(member, team, image=image, name="nightly", key="nightly", files={"a.csv": "1"})

    assert again.pk == first.pk
    assert list(DataFile.objects.values_list("name", flat=True)) == ["a.csv"]
    assert len(stored_files()) == 1


@pytest.mark.parametrize(
    "changes",
    [{"files": {"a.csv": "2"}}, {"files": {"b.csv": "1"}}, {"files": {}}, {"cpus": 2}, {"command": ["false"]}],
)
def test_the_same_idempotency_key_with_another_declaration_is_refused(member, team, image, changes):
    first = submit_job(member, team, image=image, name="nightly", key="nightly", files={"a.csv": "1"})
    again = {"name": "nightly", "files": {"a.csv": "1"}, **changes}

    with pytest.raises(submission.IdempotencyKeyReused) as refused:
        submit_job(member, team, image=image, key="nightly", **again)

    assert refused.value.made == first
    assert Job.objects.count() == 1 and len(stored_files()) == 1


def test_the_fingerprint_is_of_what_was_declared_not_of_the_order_files_came_in(member, team, image):
    first = submit_job(member, team, image=image, name="n", key="k", files={"a.csv": "1", "b.csv": "2"})

    again = submit_job(member, team, image=image, name="n", key="k", files={"b.csv": "2", "a.csv": "1"})

    assert again == first and len(first.request_fingerprint) == 64


def test_a_job_made_before_fingerprints_were_kept_is_found_by_its_key(member, team, image):
    first = submit_job(member, team, image=image, key="nightly")
    Job.objects.filter(pk=first.pk).update(request_fingerprint="")  # as migrated

    assert submit_job(member, team, image=image, key="nightly", cpus=2) == first


def test_an_idempotency_key_longer_than_its_column_is_refused_not_cut(member, team, image):
    with pytest.raises(ValueError, match="at most 255"):
        submit_job(member, team, image=image, key="k" * 256)

    assert not Job.objects.exists()


def test_a_submission_asks_for_a_scheduler_pass_once_committed(member, team, image, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        submit_job(member, team, image=image)

    assert len(callbacks) == 1


def test_a_submissions_files_are_stored_before_its_team_is_locked(member, team, image, monkeypatch):
    # The team's row lock serialises the team's submissions: copying files under it would make them queue.
    steps = []
    save_upload, lock_team = submission.save_upload, submission.budgets.lock_team
    monkeypatch.setattr(submission, "save_upload", lambda *args: steps.append("store") or save_upload(*args))
    monkeypatch.setattr(submission.budgets, "lock_team", lambda team: steps.append("lock") or lock_team(team))

    submit_job(member, team, image=image, files={"a.csv": "1", "b.csv": "2"})

    assert steps == ["store", "store", "lock"]
