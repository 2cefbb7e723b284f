"""Scheduler throughput, no containers, two scenarios in one run:

1. 10,000 waiting 1-core jobs over 100 empty nodes: passes until all are held (`holds_per_s`).
2. With reservations: 100 more nodes, each half held by running 4-core jobs whose time limits are
   staggered (10 to 160 minutes); at the head of the queue 20 jobs of 96 cores (they do not fit, so
   the first ones get reservations), behind them 10,000 1-core jobs with time limits of 5 minutes to
   2 hours; passes until one holds nothing (`reservation_holds_per_s`). Backfill then has to check
   each small job against the reservations.

Prints `holds_per_s` and `reservation_holds_per_s` last.
Run: .venv/bin/python bench/scheduler.py [--jobs N] [--nodes N] [--cores N]
"""

import argparse

from _setup import Timer, machine, throwaway_database


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--cores", type=int, default=128, help="cores per node")
    args = parser.parse_args()
    throwaway_database("e31_bench_scheduler")

    from django.contrib.auth import get_user_model

    from jobs import dispatch
    from jobs.models import RuntimeImage

    # The runs each pass queues to its nodes are counted, not sent: no worker would take them here.
    sent: list[str] = []
    dispatch.send = lambda task, *, args=None, queue=None: sent.append(task)
    user = get_user_model().objects.create(username="bench")
    image = RuntimeImage.objects.create(name="busybox", reference="e31/busybox:1")

    plain = empty_pool(args, user, image)
    reserved = pool_with_reservations(args, user, image)
    print(machine())
    print(f"runs queued: {sent.count(dispatch.RUN_TASK)}")
    for line in plain[:-1] + reserved[:-1]:
        print(line)
    print(plain[-1])
    print(reserved[-1])


def empty_pool(args, user, image) -> list[str]:
    """Scenario 1: every job fits; returns its report lines, the headline last."""
    from django.utils import timezone

    from jobs.models import Job
    from pool.nodes import Capacity, register
    from teams.models import Team

    now = timezone.now()
    nodes = [
        register(f"n{i:03d}", Capacity(cpu_ids=list(range(args.cores)), memory_mb=512 * 1024, gpu_ids=[]), now=now)
        for i in range(args.nodes)
    ]
    teams = [Team.objects.create(slug=f"t{i}", name=f"t{i}") for i in range(10)]
    Job.objects.bulk_create(
        [
            Job(team=teams[i % len(teams)], submitted_by=user, name=f"j{i}", image=image, command=["true"],
                cpus=1, memory_mb=64, time_limit_s=60, submitted_at=now)
            for i in range(args.jobs)
        ],
        batch_size=2000,
    )  # fmt: skip
    held, passes, seconds = passes_until_done(nodes)
    return [
        f"{args.jobs} jobs, {args.nodes} nodes x {args.cores} cores, {passes} passes",
        f"holds: {held} holds in {seconds:.3f} s",
        f"holds_per_s: {held / seconds:.0f} holds/s",
    ]


def pool_with_reservations(args, user, image) -> list[str]:
    """Scenario 2: big jobs at the head get reservations, small ones backfill around them."""
    from datetime import timedelta

    from django.utils import timezone

    from jobs.actions import schedule_pass
    from jobs.models import Job, Stage
    from pool.models import Node
    from pool.nodes import Capacity, register
    from pool.placement import RESERVATIONS
    from teams.models import Team

    # The first scenario's nodes keep their holds but take no more.
    Node.objects.update(state=Node.State.DRAINING)
    now = timezone.now()
    half, big_cores = args.cores // 2, args.cores * 3 // 4

    def capacity(cores: int) -> Capacity:
        return Capacity(cpu_ids=list(range(cores)), memory_mb=512 * 1024, gpu_ids=[])

    nodes = [register(f"r{i:03d}", capacity(half), now=now) for i in range(args.nodes)]
    # Fill them: 4-core jobs whose time limits run out every 10 minutes, from 10 to 160 minutes.
    filler = Team.objects.create(slug="filler", name="filler")
    per_node = half // 4
    Job.objects.bulk_create(
        [
            Job(team=filler, submitted_by=user, name=f"f{i}", image=image, command=["true"], cpus=4, memory_mb=64,
                time_limit_s=600 * (1 + i % per_node), submitted_at=now)
            for i in range(args.nodes * per_node)
        ],
        batch_size=2000,
    )  # fmt: skip
    while schedule_pass(now=timezone.now()):
        pass
    assert not Job.objects.filter(stage=Stage.SUBMIT).exists(), "the filler jobs did not all fit"
    # The same machines lend twice the cores now: half of each is free, half held by the filler.
    for node in nodes:
        register(node.name, capacity(args.cores), now=now)
    light = Team.objects.create(slug="light", name="light")
    teams = [Team.objects.create(slug=f"s{i}", name=f"s{i}") for i in range(10)]
    big = [
        Job(team=light, submitted_by=user, name=f"big{i}", image=image, command=["true"], cpus=big_cores,
            memory_mb=1024, time_limit_s=3600, submitted_at=now - timedelta(minutes=1))
        for i in range(20)
    ]  # fmt: skip
    small = [
        Job(team=teams[i % len(teams)], submitted_by=user, name=f"s{i}", image=image, command=["true"], cpus=1,
            memory_mb=64, time_limit_s=300 * (1 + i % 24), submitted_at=now)
        for i in range(args.jobs)
    ]  # fmt: skip
    Job.objects.bulk_create(big + small, batch_size=2000)
    held, passes, seconds = passes_until_done(list(Node.objects.filter(state=Node.State.ACTIVE)))
    reserved = Job.objects.filter(stage=Stage.SUBMIT, expected_start__isnull=False)
    assert reserved.count() == RESERVATIONS, f"{reserved.count()} jobs have an expected start"
    assert not Job.objects.filter(name__startswith="big", stage=Stage.RENT).exists(), "a big job fitted"
    return [
        f"{len(big)} jobs of {big_cores} cores then {args.jobs} 1-core jobs, {args.nodes} nodes x {args.cores} cores "
        f"half held (time limits 10 to {10 * per_node} min), {passes} passes",
        f"reservation holds: {held} holds in {seconds:.3f} s; {RESERVATIONS} reservations, e.g. "
        f"{reserved.order_by('queue_position').first().wait_reason}",
        f"reservation_holds_per_s: {held / seconds:.0f} holds/s",
    ]


def passes_until_done(nodes) -> tuple[int, int, float]:
    """Scheduler passes until no job waits or one holds nothing: (holds made, passes, seconds)."""
    from django.utils import timezone

    from jobs.actions import schedule_pass
    from jobs.models import Job, Stage
    from pool.models import Hold

    before = Hold.objects.count()
    passes = 0
    with Timer() as timer:
        while Job.objects.filter(stage=Stage.SUBMIT).exists():
            passes += 1
            if not schedule_pass(now=timezone.now()):
                break
    held = Hold.objects.count() - before
    cores = Hold.objects.filter(node__in=nodes, released_at__isnull=True).values_list("node_id", "cpu_set")
    seen = [(node, core) for node, cpu_set in cores for core in cpu_set]
    assert len(seen) == len(set(seen)), "a core was held twice"
    return held, passes, timer.seconds


if __name__ == "__main__":
    main()
