"""Many releases at once on PostgreSQL: one record each, a gapless sequence, a chain that verifies,
and every head in the heads file."""

import threading

import pytest
from django.db import connection
from django.utils import timezone

from accounting.heads import Head, last_head
from accounting.models import Record
from accounting.verification import verify_ledger
from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Outcome, Stage
from jobs.scheduling import dispatch
from jobs.submit import service as submission
from pool.nodes import Capacity, register
from tests.factories import run_to_release, submit_job

RELEASES, WORKERS = 200, 8
NODES, CORES = 25, 8  # room for every job at once
DEADLINE_S = 120


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch):
    # Releases nudge the scheduler through Celery; nothing here needs a pass.
    monkeypatch.setattr(dispatch, "request_schedule", lambda: None)
    monkeypatch.setattr(submission, "request_schedule", lambda: None)


@pytest.fixture
def held(transactional_db, member, team, outsider, other_team) -> list[Job]:
    capacity = Capacity(cpu_ids=list(range(CORES)), memory_mb=CORES * 64, gpu_ids=[])
    for i in range(NODES):
        register(f"n{i}", capacity, now=timezone.now())
    people = [(member, team), (outsider, other_team)]
    jobs = [submit_job(*people[i % 2], name=f"batch #{i}", cpus=1, memory_mb=64) for i in range(RELEASES)]
    schedule_pass(now=timezone.now())
    assert Job.objects.filter(stage=Stage.RENT).count() == RELEASES
    return jobs


def release(job: Job) -> None:
    """What a node's worker does at the end of a run (every third job is cancelled instead)."""
    if int(job.name.rsplit("#", 1)[1]) % 3 == 0:
        actions.cancel(job, now=timezone.now())
    else:
        run_to_release(job, now=timezone.now())


def test_concurrent_releases_make_a_gapless_chain_that_verifies_with_every_head_witnessed(held, settings):
    errors: list[BaseException] = []
    start = threading.Barrier(WORKERS)

    def worker(jobs: list[Job]) -> None:
        try:
            start.wait()
            for job in jobs:
                release(job)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(held[i::WORKERS],), daemon=True) for i in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_S)

    assert not any(t.is_alive() for t in threads), "a release is stuck (deadlock?)"
    assert errors == []
    records = list(Record.objects.order_by("sequence"))
    assert [r.sequence for r in records] == list(range(1, RELEASES + 1))
    assert sorted(r.job_id for r in records) == sorted(j.pk for j in held)  # one record per job
    assert sum(r.outcome == Outcome.CANCELLED for r in records) == len(range(0, RELEASES, 3))
    assert {(r.layout, r.currency) for r in records} == {(2, "EUR")}  # each costed at its RENT's rate, kept
    assert all(r.rate_core_hour is not None and r.attempt == 1 for r in records)
    check = verify_ledger()
    assert check, check.problem
    assert (check.records, check.head, check.warnings) == (RELEASES, Head(RELEASES, records[-1].hash), ())
    heads = [line.split() for line in settings.E31_LEDGER_HEADS_FILE.read_text().splitlines()]
    assert sorted((int(s), h) for s, h, _ in heads) == [(r.sequence, r.hash) for r in records]
    assert last_head().head.sequence == RELEASES
