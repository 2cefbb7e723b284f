"""The node's side of the OUTPUT step (worker.runner.collect): it reads the scratch folder's /output and
copies what jobs.lifecycle.actions.collect_outputs lets the team keep; no container is needed."""

import os

import pytest
from django.core.files.storage import default_storage
from django.utils import timezone

from accounting.models import StoreQuota
from jobs.models import Outcome, OutputFile
from jobs.storage.store import output_key
from tests.factories import RuntimeImageFactory, submit_job
from tests.jobs.conftest import collecting, held, running
from worker import outputs, runner
from worker.scratch import Scratch


@pytest.fixture
def job(member, team, local_node):
    return collecting(running(held(submit_job(member, team, image=RuntimeImageFactory()))))


@pytest.fixture
def scratch(job):
    scratch = Scratch(job.pk, uid=os.geteuid())
    scratch.output.mkdir(parents=True)
    (scratch.output / "a.txt").write_text("a\n")
    (scratch.output / "b.txt").write_text("b\n")
    (scratch.output / "passwd").symlink_to("/etc/passwd")
    return scratch


def kept(job) -> list[str]:
    return sorted(OutputFile.objects.filter(job=job).values_list("path", flat=True))


def stored(job, path: str) -> bool:
    return default_storage.exists(output_key(job.pk, path))


def test_the_outputs_are_kept_and_copied_and_a_symlink_is_refused_by_name(job, scratch):
    *said, _ = runner.collect(job, scratch, Outcome.SUCCEEDED, "")

    assert tuple(said) == (Outcome.SUCCEEDED, "refused outputs: passwd (symlink)")
    assert kept(job) == ["a.txt", "b.txt"] and stored(job, "a.txt") and stored(job, "b.txt")


def test_outputs_over_the_teams_store_quota_never_reach_the_store(job, scratch, team):
    StoreQuota.objects.create(team=team, effective_from=timezone.now(), quota_bytes=4096, created_at=timezone.now())

    outcome, reason, _ = runner.collect(job, scratch, Outcome.SUCCEEDED, "")

    assert outcome == Outcome.FAILED and f"over the store quota of team {team.slug}" in reason
    assert kept(job) == [] and not stored(job, "a.txt") and not stored(job, "b.txt")


def test_an_output_the_store_refuses_is_named_and_the_others_kept(job, scratch, monkeypatch):
    store = outputs.store

    def refusing(job_id, collected):
        if collected.path == "b.txt":
            raise OSError(28, "No space left on device")
        store(job_id, collected)

    monkeypatch.setattr(outputs, "store", refusing)

    outcome, reason, _ = runner.collect(job, scratch, Outcome.SUCCEEDED, "")

    assert outcome == Outcome.SUCCEEDED
    assert reason == "refused outputs: passwd (symlink), b.txt (not stored: No space left on device)"
    assert kept(job) == ["a.txt"] and stored(job, "a.txt") and not stored(job, "b.txt")
