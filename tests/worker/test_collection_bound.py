"""Output collection ends by the hold's metered bound (its time limit and the overhead): a collection
that passes it is cut, and the job ends with the reason; the meter never counts past the bound."""

import time
from decimal import Decimal

import pytest

from accounting.models import Record
from jobs.models import Outcome, OutputFile
from tests.conftest import run_here
from tests.factories import submit_job
from worker import outputs, runner

pytestmark = pytest.mark.docker


def test_a_collection_that_passes_the_holds_bound_is_cut_and_the_job_fails_saying_so(
    member, team, images, local_node, settings, monkeypatch
):
    settings.E31_HOLD_OVERHEAD_S = 10  # the bound: held at T, metered to T + 2 + 10 at most
    monkeypatch.setattr(runner, "COLLECT_AT_LEAST_S", 0)
    store = outputs.store

    def slow_store(job_id, collected):  # a store that takes a second a file
        time.sleep(1)
        store(job_id, collected)

    monkeypatch.setattr(outputs, "store", slow_store)
    command = "i=0; while [ $i -lt 20 ]; do echo $i > /output/f$i.txt; i=$((i+1)); done"
    job = submit_job(member, team, image=images["busybox"], command=command, time_limit_s=2)

    job = run_here(job)

    kept = OutputFile.objects.filter(job=job).count()
    assert job.outcome == Outcome.FAILED
    assert "its outputs were not all collected within its hold's bound (its time limit and 10s)" in job.reason
    assert f"{20 - kept} of 20 not kept" in job.reason
    assert 0 < kept < 20
    assert Record.objects.get(job=job).held_seconds <= Decimal(12)
