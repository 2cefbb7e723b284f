"""The OUTPUT step (jobs.lifecycle.actions.collect_outputs): the rows of the outputs the team's quota lets it keep,
the node's copy of them, and the outcome, reason and log notes that say what was refused."""

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounting.models import StoreQuota
from jobs.lifecycle import actions
from jobs.lifecycle.actions import REFUSED_IN_REASON, CopyShortfall, FoundOutputs, InvalidTransition
from jobs.lifecycle.history import REAPER
from jobs.models import LogChunk, Outcome, OutputFile, Stage
from jobs.storage import logs
from jobs.storage.store import output_key, save_output
from tests.jobs.conftest import T0


def collect(job, found=None, copied=None, *, outcome=Outcome.SUCCEEDED, reason=""):
    copies = []

    def copy() -> CopyShortfall:
        copies.append(job.pk)
        return copied or CopyShortfall()

    *said, notes = actions.collect_outputs(
        job, outcome=outcome, reason=reason, found=found or FoundOutputs(), copy=copy, now=T0
    )
    notes_of[job.pk] = notes
    return tuple(said), copies


notes_of: dict = {}  # the log notes each collection hands to the release


def rows(job, *paths: str, size: int = 1) -> list[OutputFile]:
    return [OutputFile(job=job, path=path, size=size, sha256="0" * 64) for path in paths]


def log_notes(job) -> str:
    assert not logs.is_sealed(job.pk), "the release seals the log, not the collection"
    return "\n".join(notes_of[job.pk])


def test_the_found_outputs_are_kept_and_the_node_copies_them(job_at):
    job = job_at(Stage.OUTPUT)

    said, copies = collect(job, FoundOutputs(rows=rows(job, "a.csv", "b.csv")))

    assert said == (Outcome.SUCCEEDED, "") and copies == [job.pk]
    assert sorted(OutputFile.objects.filter(job=job).values_list("path", flat=True)) == ["a.csv", "b.csv"]


def test_outputs_that_did_not_reach_the_store_lose_their_rows_and_the_others_stay(job_at):
    job = job_at(Stage.OUTPUT)

    said, _ = collect(
        job, FoundOutputs(rows=rows(job, "a.csv", "b.csv")), CopyShortfall(not_stored=["b.csv"], refused=["b.csv (x)"])
    )

    assert list(OutputFile.objects.filter(job=job).values_list("path", flat=True)) == ["a.csv"]
    assert said == (Outcome.SUCCEEDED, "refused outputs: b.csv (x)")


def test_outputs_over_the_quota_are_none_kept_nor_copied_and_fail_the_job(job_at, team):
    StoreQuota.objects.create(team=team, effective_from=T0, quota_bytes=4096, created_at=timezone.now())
    job = job_at(Stage.OUTPUT)
    save_output(job.pk, "earlier.bin", ContentFile(b"x", name="earlier.bin"))  # an earlier collection's copy

    (outcome, reason), copies = collect(job, FoundOutputs(rows=rows(job, "a.bin", "b.bin"), failures=["a cap"]))

    assert outcome == Outcome.FAILED and copies == []
    assert reason.startswith(f"a cap; over the store quota of team {team.slug}")
    assert not OutputFile.objects.filter(job=job).exists()
    assert not default_storage.exists(output_key(job.pk, "earlier.bin"))
    assert "over the store quota" in log_notes(job)


def test_a_failed_collection_fails_a_run_that_succeeded_and_says_why(job_at):
    job = job_at(Stage.OUTPUT)

    said, _ = collect(job, copied=CopyShortfall(failure="wrote more than the output cap"))

    assert said == (Outcome.FAILED, "wrote more than the output cap")
    assert "wrote more than the output cap" in log_notes(job)


def test_a_note_alone_keeps_the_outcome_and_joins_the_reason(job_at):
    job = job_at(Stage.OUTPUT)

    said, _ = collect(job, FoundOutputs(notes=["its files held 10 MB"]), outcome=Outcome.OUT_OF_MEMORY, reason="killed")

    assert said == (Outcome.OUT_OF_MEMORY, "killed; its files held 10 MB")


def test_the_reason_names_the_first_refused_outputs_and_the_log_names_them_all(job_at):
    job = job_at(Stage.OUTPUT)
    refused = [f"f{i}" for i in range(REFUSED_IN_REASON + 2)]

    (outcome, reason), _ = collect(job, FoundOutputs(refused=refused, log_only=["sparse files"]))

    assert outcome == Outcome.SUCCEEDED
    assert reason.startswith("refused outputs: f0, ") and reason.endswith("and 2 more, named in the log")
    assert f"f{REFUSED_IN_REASON + 1}" not in reason
    assert f"f{REFUSED_IN_REASON + 1}" in log_notes(job) and "sparse files" in log_notes(job)


def test_a_job_not_at_output_is_refused_before_anything_is_kept(job_at):
    job = job_at(Stage.RUN)

    with pytest.raises(InvalidTransition):
        collect(job, FoundOutputs(rows=rows(job, "a.csv")))
    assert not OutputFile.objects.filter(job=job).exists() and not logs.is_sealed(job.pk)


def test_a_job_released_while_its_outputs_were_copied_is_refused(job_at):
    job = job_at(Stage.OUTPUT)

    def copy() -> CopyShortfall:
        actions.release(job, outcome=Outcome.CANCELLED, reason="elsewhere", now=T0)
        return CopyShortfall()

    with pytest.raises(InvalidTransition):
        actions.collect_outputs(job, outcome=Outcome.SUCCEEDED, reason="", found=FoundOutputs(), copy=copy, now=T0)


def test_the_release_seals_the_log_with_the_collections_notes_before_it_commits(job_at):
    job = job_at(Stage.OUTPUT)
    logs.append_line(job.pk, "ran")

    actions.release(job, outcome=Outcome.SUCCEEDED, reason="", now=T0, log_notes=["refused outputs: x (symlink)"])

    assert logs.read_log(job.pk)[0] == b"[e31] ran\n[e31] refused outputs: x (symlink)\n" and logs.is_sealed(job.pk)


def test_an_attempt_retried_after_its_collection_can_neither_release_nor_seal(
    job_at, django_capture_on_commit_callbacks
):
    job = job_at(Stage.OUTPUT, max_retries=1)
    logs.append_line(job.pk, "attempt 1 ran")
    (outcome, reason), _ = collect(job, FoundOutputs(rows=rows(job, "a.csv")))
    hold = job.active_hold
    with django_capture_on_commit_callbacks(execute=True):
        actions.release_lost(job, node_name=hold.node.name, last_heartbeat=T0, now=T0, actor=REAPER)

    with django_capture_on_commit_callbacks(execute=True), pytest.raises(InvalidTransition):
        actions.release(job, outcome=outcome, reason=reason, now=T0, attempt=1, log_notes=notes_of[job.pk])

    job.refresh_from_db()
    assert job.attempt == 2 and job.stage == Stage.SUBMIT and not logs.is_sealed(job.pk)
    assert logs.read_log(job.pk)[0].startswith(b"[e31] attempt 1 ran\n")


def test_a_retry_locks_the_team_before_the_ledger(job_at):
    # A retry waiting for its team's row (a submission's checks) must not hold the ledger every release takes.
    job = job_at(Stage.OUTPUT, max_retries=1)
    hold = job.active_hold

    with CaptureQueriesContext(connection) as seen:
        actions.release_lost(job, node_name=hold.node.name, last_heartbeat=T0, now=T0, actor=REAPER)

    locks = [q["sql"] for q in seen.captured_queries if "FOR UPDATE" in q["sql"]]
    team_at = next(i for i, sql in enumerate(locks) if '"teams_team"' in sql)
    ledger_at = next(i for i, sql in enumerate(locks) if '"accounting_ledger"' in sql)
    assert team_at < ledger_at


def test_a_store_that_fails_to_seal_the_log_leaves_it_live_and_the_job_released(job_at, monkeypatch):
    job = job_at(Stage.OUTPUT)
    logs.append_line(job.pk, "ran")

    def full_disk(job_id, *, notes=()):
        LogChunk.objects.filter(job_id=job_id).delete()  # the database part of a seal, to be rolled back
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(logs, "seal", full_disk)

    actions.release(job, outcome=Outcome.SUCCEEDED, reason="", now=T0, log_notes=["a note"])

    job.refresh_from_db()
    assert job.stage == Stage.RELEASE and not logs.is_sealed(job.pk)
    assert logs.read_log(job.pk)[0] == b"[e31] ran\n"
