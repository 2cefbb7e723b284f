"""RENT: the scheduler holds exact cores, memory and gpus on one node, and never double-books them."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import IntegrityError
from django.utils import timezone

from jobs.lifecycle.actions import hold, schedule_pass
from jobs.models import Job, Outcome, Stage
from pool.models import HeldCore, HeldGpu, Hold, Node
from pool.nodes import Capacity, free_capacity, register, set_state
from pool.placement.backfill import never_fits
from pool.placement.reasons import Reason, WaitCode
from pool.placement.types import FreeCapacity, Placement, Request
from pool.scheduler import free_on, running_holds
from tests.factories import run_to_release, submit_job

NOW = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)


def add_node(name: str, *, cpus: int = 4, memory_mb: int = 4096, gpu_ids: tuple[str, ...] = ()) -> Node:
    return register(name, Capacity(cpu_ids=list(range(cpus)), memory_mb=memory_mb, gpu_ids=list(gpu_ids)), now=NOW)


def stage_of(job: Job) -> str:
    job.refresh_from_db()
    return job.stage


def active_holds():
    return Hold.objects.filter(released_at__isnull=True)


def test_hold_takes_exact_cores_and_memory_and_moves_the_job_to_rent(member, team):
    node = add_node("n1", cpus=4, memory_mb=4096)
    job = submit_job(member, team, cpus=2, memory_mb=512)

    [hold] = schedule_pass(now=NOW)

    assert (hold.job, hold.node, hold.cpu_set, hold.memory_mb, hold.gpu_ids) == (job, node, [0, 1], 512, [])
    assert set(HeldCore.objects.filter(hold=hold).values_list("core", flat=True)) == {0, 1}
    job.refresh_from_db()
    assert job.stage == Stage.RENT
    assert job.held_at == hold.held_at == NOW  # the meter starts when compute is held
    assert free_capacity([node])[node.pk].memory_mb == 4096 - 512


def test_hold_never_shares_a_core(member, team):
    add_node("n1", cpus=4)
    jobs = [submit_job(member, team, cpus=cpus) for cpus in (2, 1, 1, 2, 1)]

    holds = schedule_pass(now=NOW)

    assert [h.job for h in holds] == jobs[:3]  # 2 + 1 + 1 cores fill the node
    assert [stage_of(j) for j in jobs[3:]] == [Stage.SUBMIT, Stage.SUBMIT]
    cores = [core for hold in active_holds() for core in hold.cpu_set]
    assert sorted(cores) == [0, 1, 2, 3]  # each core once: no two holds share one
    assert schedule_pass(now=NOW + timedelta(minutes=1)) == []


def test_older_jobs_are_held_first(member, team):
    add_node("n1", cpus=2)
    first, second, third = (submit_job(member, team, cpus=1) for _ in range(3))

    holds = schedule_pass(now=NOW)

    assert [h.job for h in holds] == [first, second]
    assert stage_of(third) == Stage.SUBMIT


def test_a_small_job_behind_a_big_one_that_does_not_fit_yet_is_held_when_it_ends_first(member, team):
    add_node("n1", cpus=4)
    submit_job(member, team, cpus=3, time_limit_s=3600)
    schedule_pass(now=NOW)
    big = submit_job(member, team, cpus=4)
    small = submit_job(member, team, cpus=1, time_limit_s=600)  # done before the 3 cores free up

    [hold] = schedule_pass(now=NOW + timedelta(minutes=1))

    assert hold.job == small and hold.cpu_set == [3]
    assert stage_of(big) == Stage.SUBMIT


def test_a_job_waits_without_capacity_and_is_held_once_another_is_released(member, team):
    add_node("n1", cpus=2)
    running = submit_job(member, team, cpus=2)
    schedule_pass(now=NOW)
    waiting = submit_job(member, team, cpus=1)

    assert schedule_pass(now=NOW + timedelta(minutes=1)) == []
    assert stage_of(waiting) == Stage.SUBMIT

    run_to_release(running, now=NOW + timedelta(hours=1))
    [hold] = schedule_pass(now=NOW + timedelta(hours=1, seconds=1))

    assert hold.job == waiting and hold.cpu_set == [0]
    assert stage_of(waiting) == Stage.RENT


def test_memory_is_a_limit_too(member, team):
    node = add_node("n1", cpus=4, memory_mb=1024)
    submit_job(member, team, cpus=1, memory_mb=768)
    too_much = submit_job(member, team, cpus=1, memory_mb=512)
    small = submit_job(member, team, cpus=1, memory_mb=256)

    holds = schedule_pass(now=NOW)

    assert small in [h.job for h in holds]
    assert stage_of(too_much) == Stage.SUBMIT  # cores are free, memory is not
    free = free_capacity([node])[node.pk]
    assert (len(free.cpu_ids), free.memory_mb) == (2, 0)


def test_gpus_are_held_by_device_id(member, team):
    add_node("n1", cpus=4, gpu_ids=("GPU-aaa", "GPU-bbb"))
    first, second, third = (submit_job(member, team, cpus=1, gpus=1) for _ in range(3))

    holds = schedule_pass(now=NOW)

    assert [(h.job, h.gpu_ids) for h in holds] == [(first, ["GPU-aaa"]), (second, ["GPU-bbb"])]
    assert sorted(HeldGpu.objects.values_list("device", flat=True)) == ["GPU-aaa", "GPU-bbb"]
    assert stage_of(third) == Stage.SUBMIT  # a core is free, no gpu is


def test_a_released_hold_gives_its_cores_and_gpus_back(member, team):
    node = add_node("n1", cpus=2, gpu_ids=("GPU-aaa",))
    job = submit_job(member, team, cpus=2, gpus=1, memory_mb=1000)
    schedule_pass(now=NOW)

    run_to_release(job, outcome=Outcome.FAILED, exit_code=1, reason="exit 1", now=NOW + timedelta(minutes=5))

    assert not HeldCore.objects.exists() and not HeldGpu.objects.exists()
    assert free_capacity([node])[node.pk].cpu_ids == [0, 1]
    assert free_capacity([node])[node.pk].gpu_ids == ["GPU-aaa"]
    assert free_capacity([node])[node.pk].memory_mb == 4096


def test_the_pass_counts_free_compute_as_the_held_devices_do(member, team):
    node, other = add_node("n1", cpus=4, gpu_ids=("GPU-aaa", "GPU-bbb")), add_node("n2", cpus=2)
    first = submit_job(member, team, cpus=2, gpus=1, memory_mb=1000)
    submit_job(member, team, cpus=1, memory_mb=256)
    submit_job(member, team, cpus=1, gpus=1, memory_mb=512)
    schedule_pass(now=NOW)
    run_to_release(first, outcome=Outcome.SUCCEEDED, exit_code=0, reason="", now=NOW + timedelta(minutes=1))

    nodes = [node, other]
    assert free_on(nodes, running_holds(nodes)) == free_capacity(nodes)
    lent = {n.pk: FreeCapacity(n.cpu_ids, n.memory_mb, n.gpu_ids) for n in nodes}
    assert free_on(nodes, running_holds(nodes)) != lent


def test_best_fit_places_a_job_on_the_node_it_leaves_least_idle(member, team):
    add_node("big", cpus=8)
    add_node("small", cpus=2)
    two = submit_job(member, team, cpus=2)
    four = submit_job(member, team, cpus=4)

    holds = {h.job: h.node.name for h in schedule_pass(now=NOW)}

    assert holds == {two: "small", four: "big"}


def test_best_fit_counts_what_is_already_held(member, team):
    add_node("a", cpus=6)
    add_node("b", cpus=4)
    submit_job(member, team, cpus=5)
    schedule_pass(now=NOW)  # only "a" can take 5 cores: 1 left there, 4 on "b"
    one = submit_job(member, team, cpus=1)

    [hold] = schedule_pass(now=NOW + timedelta(minutes=1))

    assert (hold.job, hold.node.name, hold.cpu_set) == (one, "a", [5])


def test_a_draining_node_gets_no_new_holds_until_it_is_resumed(member, team):
    node = set_state(add_node("n1"), Node.State.DRAINING, now=timezone.now())
    job = submit_job(member, team)

    assert schedule_pass(now=NOW) == []
    assert stage_of(job) == Stage.SUBMIT

    set_state(node, Node.State.ACTIVE, now=timezone.now())
    [hold] = schedule_pass(now=NOW + timedelta(minutes=1))
    assert hold.job == job


def test_an_offline_node_gets_no_new_holds_until_its_worker_registers_again(member, team):
    Node.objects.filter(pk=add_node("n1").pk).update(state=Node.State.OFFLINE)
    job = submit_job(member, team)

    assert schedule_pass(now=NOW) == []
    assert stage_of(job) == Stage.SUBMIT

    add_node("n1")
    [hold] = schedule_pass(now=NOW + timedelta(minutes=1))
    assert hold.job == job


def test_a_draining_node_keeps_its_holds(member, team):
    node = add_node("n1")
    job = submit_job(member, team)
    [hold] = schedule_pass(now=NOW)

    set_state(node, Node.State.DRAINING, now=timezone.now())

    assert stage_of(job) == Stage.RENT
    assert active_holds().get() == hold


def test_the_database_refuses_a_core_held_twice_even_bypassing_the_scheduler(member, team):
    node = add_node("n1", cpus=2)
    submit_job(member, team, cpus=1)
    schedule_pass(now=NOW)  # holds core 0
    intruder = submit_job(member, team, cpus=1)

    with pytest.raises(IntegrityError):
        hold([Placement(intruder.pk, 1, node, [0], [], intruder.memory_mb)], now=NOW)

    assert stage_of(intruder) == Stage.SUBMIT  # the whole hold was rolled back
    assert active_holds().count() == 1


def test_the_database_refuses_a_gpu_held_twice_even_bypassing_the_scheduler(member, team):
    node = add_node("n1", cpus=2, gpu_ids=("GPU-aaa",))
    submit_job(member, team, cpus=1, gpus=1)
    schedule_pass(now=NOW)
    intruder = submit_job(member, team, cpus=1, gpus=1)

    with pytest.raises(IntegrityError):
        hold([Placement(intruder.pk, 1, node, [1], ["GPU-aaa"], intruder.memory_mb)], now=NOW)

    assert stage_of(intruder) == Stage.SUBMIT


def test_a_core_listed_twice_is_lent_once(member, team):
    # Otherwise the scheduler counts it twice, tries to hold it twice, and the whole pass fails.
    register("n1", Capacity(cpu_ids=[0, 0], memory_mb=1024, gpu_ids=["GPU-aaa", "GPU-aaa"]), now=NOW)
    two_cores = submit_job(member, team, cpus=2)
    two_gpus = submit_job(member, team, cpus=1, gpus=2)

    assert schedule_pass(now=NOW) == []
    # The node really lends one core and one gpu, so neither job can ever be held there.
    for job in (two_cores, two_gpus):
        job.refresh_from_db()
        assert (job.stage, job.outcome) == (Stage.RELEASE, "rejected")
        assert "the largest node has 1 core" in job.reason


def test_a_hold_takes_the_lowest_free_core_ids(member, team):
    register("n1", Capacity(cpu_ids=[7, 3, 5], memory_mb=1024, gpu_ids=[]), now=NOW)
    submit_job(member, team, cpus=2)

    [hold] = schedule_pass(now=NOW)

    assert hold.cpu_set == [3, 5]


def test_never_fits_explains_what_no_node_can_give(db):
    nodes = [add_node("wide", cpus=4, memory_mb=1024), add_node("deep", cpus=1, memory_mb=8192)]

    why = never_fits(Request(cpus=8, memory_mb=512, gpus=0), nodes)

    assert why == Reason(
        WaitCode.NEVER_FITS,
        {"cpus": 8, "memory_mb": 512, "gpus": 0, "largest_cpus": 4, "largest_memory_mb": 8192, "largest_gpus": 0},
    )


def test_never_fits_when_no_single_node_has_both_the_cores_and_the_memory(db):
    nodes = [add_node("wide", cpus=4, memory_mb=1024), add_node("deep", cpus=1, memory_mb=8192)]

    assert never_fits(Request(cpus=4, memory_mb=8192, gpus=0), nodes) is not None
    assert never_fits(Request(cpus=4, memory_mb=1024, gpus=0), nodes) is None
    assert never_fits(Request(cpus=1, memory_mb=8192, gpus=0), nodes) is None


def test_never_fits_says_nothing_about_an_empty_pool(db):
    assert never_fits(Request(cpus=64, memory_mb=1 << 20, gpus=8), []) is None
