"""Scheduler passes with reservations: a big job at the head of the queue is not starved by a stream
of small ones; what it does not need, and the time before it starts, still go to the jobs behind."""

from datetime import UTC, datetime, timedelta

import pytest

from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Outcome, Stage
from pool.models import Node
from pool.nodes import Capacity, register
from pool.placement.backfill import RESERVATIONS
from pool.scheduler import running_holds
from tests.factories import member_of, submit_job

T0 = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)


def add_node(name: str, *, cpus: int, memory_mb: int = 4096, gpu_ids: tuple[str, ...] = ()) -> Node:
    return register(name, Capacity(cpu_ids=list(range(cpus)), memory_mb=memory_mb, gpu_ids=list(gpu_ids)), now=T0)


def minutes(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


def running_job(user, team, *, cpus: int = 1, time_limit_s: int, at: datetime, **request) -> Job:
    """A job held and started at `at` (its node's worker claimed the run)."""
    job = submit_job(user, team, cpus=cpus, time_limit_s=time_limit_s, **request)
    holds = schedule_pass(now=at)
    assert job.pk in {h.job_id for h in holds}, "the pool had no room for it"
    job.refresh_from_db()
    assert actions.start_run(job, now=at)
    return job


def ends(job: Job, *, at: datetime) -> None:
    """A running job ends early, before its time limit: its hold is released."""
    actions.finish_run(job, outcome=Outcome.SUCCEEDED, exit_code=0, reason="", now=at)
    actions.release(job, outcome=Outcome.SUCCEEDED, reason="", exit_code=0, now=at)


def stage_of(job: Job) -> str:
    job.refresh_from_db()
    return job.stage


@pytest.fixture
def heavy(other_team):
    """The blue team, whose jobs fill the pool: its fair-share usage grows while they run."""
    return other_team, member_of(other_team, "bea")


def test_a_big_job_of_the_lighter_team_is_not_starved_by_a_stream_of_small_ones(member, team, heavy):
    blue, bea = heavy
    add_node("n1", cpus=2)
    first = running_job(bea, blue, time_limit_s=3600, at=T0)
    second = running_job(bea, blue, time_limit_s=3600, at=T0)
    big = submit_job(member, team, cpus=2, time_limit_s=3600)  # red has used nothing: it is first in the queue
    stream = [submit_job(bea, blue, time_limit_s=3600) for _ in range(3)]

    assert schedule_pass(now=minutes(1)) == []
    big.refresh_from_db()
    assert (big.queue_position, big.expected_start) == (1, minutes(60))  # when `second` must have ended

    ends(first, at=minutes(10))  # a core frees up early
    assert schedule_pass(now=minutes(10)) == []  # an hour-long small job would delay the big one
    assert {stage_of(j) for j in stream} == {Stage.SUBMIT}

    ends(second, at=minutes(20))
    [hold] = schedule_pass(now=minutes(20))
    assert (hold.job, hold.cpu_set) == (big, [0, 1])  # as soon as its cores are free


def test_small_jobs_that_end_before_the_reservation_run_first(member, team, heavy):
    blue, bea = heavy
    add_node("n1", cpus=2)
    running_job(bea, blue, time_limit_s=3600, at=T0)
    first = running_job(bea, blue, time_limit_s=3600, at=T0)
    big = submit_job(member, team, cpus=2, time_limit_s=3600)
    long = submit_job(bea, blue, time_limit_s=3600)
    short = submit_job(bea, blue, time_limit_s=600)

    ends(first, at=minutes(10))
    [hold] = schedule_pass(now=minutes(10))

    assert hold.job == short  # done by 22:20, long before the big job's 23:00
    assert (stage_of(big), stage_of(long)) == (Stage.SUBMIT, Stage.SUBMIT)
    big.refresh_from_db()
    assert big.expected_start == minutes(60)
    assert big.wait_reason == "reserved: expected to start by 23:00 UTC when n1 frees 1 core"


def test_a_job_that_uses_only_cores_the_reservation_does_not_need_is_held(member, team, heavy):
    blue, bea = heavy
    add_node("n1", cpus=4)
    running_job(bea, blue, cpus=2, time_limit_s=600, at=T0)  # cores 0 and 1 until 22:10
    big = submit_job(member, team, cpus=3, time_limit_s=3600)
    beside, behind = submit_job(bea, blue, time_limit_s=7200), submit_job(bea, blue, time_limit_s=7200)

    [hold] = schedule_pass(now=minutes(1))

    assert (hold.job, hold.cpu_set) == (beside, [2])  # the big job takes 0, 1 and 3 at 22:10
    assert (stage_of(big), stage_of(behind)) == (Stage.SUBMIT, Stage.SUBMIT)


def test_reservations_across_nodes_go_where_compute_frees_up_first(member, team, heavy):
    blue, bea = heavy
    for name in ("n1", "n2"):
        add_node(name, cpus=2)
    running_job(bea, blue, cpus=2, time_limit_s=3600, at=T0)  # best fit: n1, until 23:00
    running_job(bea, blue, cpus=2, time_limit_s=600, at=T0)  # n2, until 22:10
    first, second = (submit_job(member, team, cpus=2, time_limit_s=1800) for _ in range(2))

    schedule_pass(now=minutes(1))

    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.expected_start, second.expected_start) == (minutes(10), minutes(40))  # n2, then n2 again
    assert first.wait_reason == "reserved: expected to start by 22:10 UTC when n2 frees 2 cores"
    assert second.wait_reason == "reserved: expected to start by 22:40 UTC on n2, after a reserved job ahead"


def test_memory_and_gpus_are_reserved_too(member, team, heavy):
    blue, bea = heavy
    add_node("n1", cpus=4, memory_mb=4096, gpu_ids=("GPU-a", "GPU-b"))
    running_job(bea, blue, time_limit_s=600, at=T0, memory_mb=2048, gpus=1)  # GPU-a and 2048 MB until 22:10
    big = submit_job(member, team, cpus=1, memory_mb=3072, gpus=2, time_limit_s=3600)
    needs_the_gpu = submit_job(bea, blue, time_limit_s=7200, memory_mb=64, gpus=1)
    needs_the_memory = submit_job(bea, blue, time_limit_s=7200, memory_mb=1088)
    fits_beside = submit_job(bea, blue, time_limit_s=7200, memory_mb=960)

    [hold] = schedule_pass(now=minutes(1))

    assert hold.job == fits_beside  # the big job leaves 4096 - 3072 = 1024 MB from 22:10, and no gpu
    big.refresh_from_db()
    assert big.wait_reason == "reserved: expected to start by 22:10 UTC when n1 frees 1024 MB and 1 gpu"
    assert (stage_of(needs_the_gpu), stage_of(needs_the_memory)) == (Stage.SUBMIT, Stage.SUBMIT)


def test_a_hold_ends_at_its_jobs_start_plus_the_time_limit_or_its_own_before_the_job_starts(member, team):
    node = add_node("n1", cpus=2)
    started = running_job(member, team, time_limit_s=600, at=T0)
    Job.objects.filter(pk=started.pk).update(started_at=minutes(2))  # its container took two minutes to start
    submit_job(member, team, time_limit_s=300)
    schedule_pass(now=minutes(3))  # held, not started yet

    holds = sorted(running_holds([node]), key=lambda r: r.ends_at)
    assert [(r.node_id, r.cpu_ids, r.memory_mb, r.gpu_ids, r.ends_at) for r in holds] == [
        (node.pk, [1], 64, [], minutes(8)),
        (node.pk, [0], 64, [], minutes(12)),
    ]


@pytest.mark.parametrize("waiting", [5, 60])
def test_a_pass_makes_as_many_queries_whatever_the_length_of_the_queue(
    waiting, member, team, heavy, django_assert_max_num_queries
):
    blue, bea = heavy
    add_node("n1", cpus=2)
    add_node("n2", cpus=4)
    running_job(bea, blue, cpus=2, time_limit_s=3600, at=T0)
    for i in range(waiting):  # one held, reservations, the rest waiting behind them
        submit_job(member, team, cpus=(4, 2, 1)[i % 3], time_limit_s=600)

    with django_assert_max_num_queries(25):
        assert len(schedule_pass(now=minutes(1))) == 1

    reserved = Job.objects.filter(stage=Stage.SUBMIT, expected_start__isnull=False)
    assert reserved.count() == min(RESERVATIONS, waiting - 1)
