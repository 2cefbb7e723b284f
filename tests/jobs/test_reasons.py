"""The words of a placement's reasons, as a waiting job's row, a rejection and the job form say them."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from pool.models import Node
from pool.placement.backfill import place
from pool.placement.reasons import Reason, ShortOfScratch, WaitCode, reason_text
from pool.placement.types import FreeCapacity, QueueCaps, Request, Waiting

NOW = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)
SHORT = (ShortOfScratch("n1", 800, 1024),)
LARGEST = {"largest_cpus": 4, "largest_memory_mb": 8192, "largest_gpus": 0}


def reserved(*, start: datetime = NOW + timedelta(minutes=20), cpus=0, memory_mb=0, gpus=0) -> Reason:
    return Reason(WaitCode.RESERVED, {"cpus": cpus, "memory_mb": memory_mb, "gpus": gpus}, node="n1", start=start)


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        (reserved(cpus=1), "reserved: expected to start by 22:20 UTC when n1 frees 1 core"),
        (reserved(memory_mb=1024, gpus=1), "reserved: expected to start by 22:20 UTC when n1 frees 1024 MB and 1 gpu"),
        (
            Reason(WaitCode.RESERVED_AFTER, node="n1", start=NOW + timedelta(minutes=40)),
            "reserved: expected to start by 22:40 UTC on n1, after a reserved job ahead",
        ),
        (Reason(WaitCode.NEEDS_CORES, {"needs": 4, "largest_free": 0}), "needs 4 cores; largest free: 0"),
        (
            Reason(WaitCode.NEEDS_MEMORY, {"needs": 8000, "largest_free": 7168}, ahead=1),
            "needs 8000 MB; largest free: 7168 MB; 1 job ahead in the queue",
        ),
        (
            Reason(WaitCode.NEEDS_GPUS, {"needs": 2, "largest_free": 1}, ahead=3),
            "needs 2 gpus; largest free: 1; 3 jobs ahead in the queue",
        ),
        (Reason(WaitCode.NOT_AT_ONCE), "no single node has all of it free at once"),
        (
            Reason(WaitCode.BEHIND_RESERVATION, ahead=1),
            "starting now would delay a reserved job ahead; 1 job ahead in the queue",
        ),
        (Reason(WaitCode.IN_LINE), "next to be held"),
        (Reason(WaitCode.IN_LINE, ahead=2), "2 jobs ahead in the queue"),
        (Reason(WaitCode.NO_NODE), "no node is accepting work (all are draining or offline)"),
        (
            Reason(WaitCode.SHORT_OF_SCRATCH, short_of_scratch=SHORT),
            "n1 is short of scratch space: 800 MB free, keeps 1024 MB",
        ),
        (
            Reason(WaitCode.NEEDS_CORES, {"needs": 4, "largest_free": 2}, short_of_scratch=SHORT),
            "needs 4 cores; largest free: 2 (n1 is short of scratch space: 800 MB free, keeps 1024 MB)",
        ),
        (
            Reason(WaitCode.NEVER_FITS, {"cpus": 8, "memory_mb": 512, "gpus": 0} | LARGEST),
            "needs 8 cores, 512 MB, 0 gpus; the largest node has 4 cores, 8192 MB, 0 gpus",
        ),
        (
            Reason(WaitCode.QUEUE_LIMIT, {"cores": 4, "in_use": 4}, ahead=2, detail="batch"),
            "its team holds 4 cores in queue batch, its limit is 4; 2 jobs ahead in the queue",
        ),
        (
            Reason(WaitCode.QUEUE_LIMIT, {"jobs": 1, "in_use": 1}, detail="urgent"),
            "its team runs 1 job in queue urgent, its limit of 1",
        ),
        (Reason(WaitCode.MISSING_FEATURE, detail="bigmem"), "no node taking work has the feature bigmem it asks for"),
        (
            Reason(WaitCode.MAINTENANCE, ahead=1, start=NOW + timedelta(minutes=30, seconds=30), detail="new disks"),
            "its time limit would run into the maintenance window from 22:30 UTC (new disks): it waits for the"
            " window to end",
        ),
    ],
)
def test_each_reason_is_said_in_words_with_its_numbers(reason, said):
    assert reason_text(reason, now=NOW) == said


def test_a_start_that_is_not_today_is_said_with_its_date_rounded_up_to_the_minute():
    start = NOW + timedelta(hours=3, seconds=30)  # 01:00:30 tomorrow

    assert reason_text(reserved(start=start, cpus=2), now=NOW) == (
        "reserved: expected to start by 2026-03-03 01:01 UTC when n1 frees 2 cores"
    )


def test_a_start_is_said_in_the_sites_time_zone(settings):
    settings.TIME_ZONE = "Europe/Paris"

    assert reason_text(reserved(cpus=1), now=NOW) == "reserved: expected to start by 23:20 CET when n1 frees 1 core"


def test_at_most_three_nodes_short_of_scratch_are_named():
    short = tuple(ShortOfScratch(f"n{i}", 800, 1024) for i in range(1, 6))

    said = reason_text(Reason(WaitCode.SHORT_OF_SCRATCH, short_of_scratch=short), now=NOW)

    assert said.count("is short of scratch space") == 3 and said.endswith(" and 2 nodes more")


def test_a_job_bigger_than_its_queues_cap_says_so_not_that_it_waits_for_its_teams_jobs():
    """A cap an operator lowered after the job was submitted: no job of its team ending lets it start."""
    n1 = Node(pk=1, name="n1", cpu_ids=list(range(8)), memory_mb=4096, gpu_ids=[], features=[])
    job = Waiting(uuid.uuid4(), 1, NOW, 1, Request(8, 64, 0), 600, queue_id=7)
    free = {1: FreeCapacity(list(range(8)), 4096, [])}
    caps = {7: QueueCaps("batch", cores=4)}

    [left] = place([job], [n1], free, running=[], now=NOW, limit=10, caps=caps).left

    assert (
        reason_text(left.reason, now=NOW) == "it asks for 8 cores, more than queue batch lets a team hold at once (4)"
    )
