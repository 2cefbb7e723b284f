"""The end of the OUTPUT step (jobs.actions.collect_outputs): the rows of the outputs the node could
not store go, the outcome and reason say what was refused, and the log is sealed with the notes."""

import pytest

from jobs import actions, logs, quotas
from jobs.actions import REFUSED_IN_REASON, InvalidTransition
from jobs.models import Outcome, OutputFile, Stage
from tests.jobs.conftest import T0


def collect(job, **given):
    fields = {"outcome": Outcome.SUCCEEDED, "reason": "", "failures": [], "notes": [], "refused": [], "log_only": []}
    return actions.collect_outputs(job, **{**fields, "not_stored": [], **given})


def stored_log(job) -> str:
    assert logs.is_sealed(job.pk)
    return logs.read_log(job.pk)[0].decode()


def test_outputs_that_did_not_reach_the_store_lose_their_rows_and_the_others_stay(job_at):
    job = job_at(Stage.OUTPUT)
    rows = [OutputFile(job=job, path=path, size=1, sha256="0" * 64) for path in ("a.csv", "b.csv")]
    assert quotas.keep_outputs(job, rows, now=T0) is None

    collect(job, not_stored=["b.csv"])

    assert list(OutputFile.objects.filter(job=job).values_list("path", flat=True)) == ["a.csv"]


def test_a_failed_collection_fails_a_run_that_succeeded_and_says_why(job_at):
    job = job_at(Stage.OUTPUT)

    said = collect(job, failures=["wrote more than the output cap"])

    assert said == (Outcome.FAILED, "wrote more than the output cap")
    assert "wrote more than the output cap" in stored_log(job)


def test_a_note_alone_keeps_the_outcome_and_joins_the_reason(job_at):
    job = job_at(Stage.OUTPUT)

    said = collect(job, outcome=Outcome.OUT_OF_MEMORY, reason="killed", notes=["its files held 10 MB"])

    assert said == (Outcome.OUT_OF_MEMORY, "killed; its files held 10 MB")


def test_the_reason_names_the_first_refused_outputs_and_the_log_names_them_all(job_at):
    job = job_at(Stage.OUTPUT)
    refused = [f"f{i}" for i in range(REFUSED_IN_REASON + 2)]

    outcome, reason = collect(job, refused=refused, log_only=["sparse files"])

    assert outcome == Outcome.SUCCEEDED
    assert reason.startswith("refused outputs: f0, ") and reason.endswith("and 2 more, named in the log")
    assert f"f{REFUSED_IN_REASON + 1}" not in reason
    assert f"f{REFUSED_IN_REASON + 1}" in stored_log(job) and "sparse files" in stored_log(job)


def test_a_job_not_at_output_is_refused(job_at):
    job = job_at(Stage.RUN)

    with pytest.raises(InvalidTransition):
        collect(job)
    assert not logs.is_sealed(job.pk)
