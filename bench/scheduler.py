"""Scheduler throughput, no containers, two scenarios in one run:

1. 10,000 waiting 1-core jobs over 100 empty nodes: passes until all are held (`holds_per_s`).
2. With reservations: 100 more nodes, each half held by running 4-core jobs whose time limits are
   staggered (10 to 160 minutes); at the head of the queue 20 jobs of 96 cores (they do not fit, so
   the first ones get reservations), behind them 10,000 1-core jobs with time limits of 5 minutes to
   2 hours; passes until one holds nothing (`reservation_holds_per_s`). Backfill then has to check
   each small job against the reservations.
3. The same with the pool policy in play, on fresh nodes and teams: three queues (urgent, priority 10,
   holds the big jobs; batch, the default, a cap of 400 running cores a team; scavenger, priority -10)
   with a third of the small jobs in scavenger; features (half the nodes bigmem, a quarter nvme) with
   every fifth small job asking for bigmem and every seventh for nvme|bigmem; a maintenance window
   starting in an hour on ten nodes (`policy_reservation_holds_per_s`).

Prints `holds_per_s`, `reservation_holds_per_s` and `policy_reservation_holds_per_s` last, with the
reservations' ratio to the plain pool (their anchor) and the policy run's to the run without it (its anchor).
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

    from jobs.models import RuntimeImage
    from jobs.scheduling import dispatch

    # The runs each pass queues to its nodes are counted, not sent: no worker would take them here.
    sent: list[str] = []
    dispatch.send = lambda task, *, args=None, queue=None: sent.append(task)
    user = get_user_model().objects.create(username="bench")
    image = RuntimeImage.objects.create(name="busybox", reference="e31/busybox:1")

    plain, plain_rate = empty_pool(args, user, image)
    reserved, reserved_rate = pool_with_reservations(args, user, image, policy=False)
    policy, policy_rate = pool_with_reservations(args, user, image, policy=True)
    print(machine())
    print(f"runs queued: {sent.count(dispatch.RUN_TASK)}")
    for line in plain[:-1] + reserved + policy:
        print(line)
    print(plain[-1])
    print(f"reservation_holds_per_s: {reserved_rate:.0f} holds/s")
    print(f"reservation_vs_plain_ratio: {reserved_rate / plain_rate:.2f}")
    print(f"policy_reservation_holds_per_s: {policy_rate:.0f} holds/s")
    print(f"policy_vs_plain_ratio: {policy_rate / reserved_rate:.2f}")


def empty_pool(args, user, image) -> tuple[list[str], float]:
    """Scenario 1: every job fits; returns its report lines, the headline last, and holds/s."""
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
        f"holds_per_s: {held / seconds:.0f} holds/s (no anchor: the plain pool is the others')",
    ], held / seconds


def pool_with_reservations(args, user, image, *, policy: bool) -> tuple[list[str], float]:
    """Scenarios 2 and 3: big jobs at the head get reservations, small ones backfill around them; with
    `policy`, queues, features and a window in play. Returns its report lines and holds/s."""
    from datetime import timedelta

    from django.utils import timezone

    from jobs.lifecycle.actions import schedule_pass
    from jobs.models import Job, Stage
    from pool.models import Hold, MaintenanceWindow, Node, Queue
    from pool.nodes import Capacity, register
    from pool.placement.backfill import RESERVATIONS
    from teams.models import Team

    # The earlier scenarios' nodes keep their holds but take no more; their waiting jobs leave the queue.
    Node.objects.update(state=Node.State.DRAINING)
    Job.objects.filter(stage=Stage.SUBMIT).update(held_back=True)
    now = timezone.now()
    half, big_cores = args.cores // 2, args.cores * 3 // 4
    prefix = "p" if policy else "r"

    def capacity(cores: int) -> Capacity:
        return Capacity(cpu_ids=list(range(cores)), memory_mb=512 * 1024, gpu_ids=[])

    nodes = [register(f"{prefix}{i:03d}", capacity(half), now=now) for i in range(args.nodes)]
    # Fill them: 4-core jobs whose time limits run out every 10 minutes, from 10 to 160 minutes.
    filler = Team.objects.create(slug=f"{prefix}filler", name=f"{prefix}filler")
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
    assert not Job.objects.filter(stage=Stage.SUBMIT, held_back=False).exists(), "the filler jobs did not all fit"
    # The same machines lend twice the cores now: half of each is free, half held by the filler.
    for node in nodes:
        register(node.name, capacity(args.cores), now=now)
    urgent = batch = scavenger = None
    if policy:
        urgent = Queue.objects.create(name="urgent", priority=10, changed_at=now)
        batch = Queue.objects.get(is_default=True)
        Queue.objects.filter(pk=batch.pk).update(max_running_cores_per_team=400)
        scavenger = Queue.objects.create(name="scavenger", priority=-10, changed_at=now)
        for i, node in enumerate(nodes):
            features = ["bigmem"] * (i % 2 == 0) + ["nvme"] * (i % 4 == 1)
            Node.objects.filter(pk=node.pk).update(features=features)
        window = MaintenanceWindow.objects.create(
            starts_at=now + timedelta(hours=1), ends_at=now + timedelta(hours=3), reason="bench: firmware",
            created_at=now,
        )  # fmt: skip
        window.nodes.set(nodes[:10])
    light = Team.objects.create(slug=f"{prefix}light", name=f"{prefix}light")
    teams = [Team.objects.create(slug=f"{prefix}s{i}", name=f"{prefix}s{i}") for i in range(10)]
    big = [
        Job(team=light, submitted_by=user, name=f"big{i}", image=image, command=["true"], cpus=big_cores,
            memory_mb=1024, time_limit_s=3600, submitted_at=now - timedelta(minutes=1), queue=urgent)
        for i in range(20)
    ]  # fmt: skip
    small = [
        Job(team=teams[i % len(teams)], submitted_by=user, name=f"s{i}", image=image, command=["true"], cpus=1,
            memory_mb=64, time_limit_s=300 * (1 + i % 24), submitted_at=now,
            queue=(scavenger if i % 3 == 2 else batch) if policy else None,
            constraint=("bigmem" if i % 5 == 0 else "nvme|bigmem" if i % 7 == 0 else "") if policy else "")
        for i in range(args.jobs)
    ]  # fmt: skip
    Job.objects.bulk_create(big + small, batch_size=2000)
    held, passes, seconds = passes_until_done(list(Node.objects.filter(state=Node.State.ACTIVE)))
    waiting = Job.objects.filter(stage=Stage.SUBMIT, held_back=False)
    reserved = waiting.filter(expected_start__isnull=False)
    if not policy:
        assert reserved.count() == RESERVATIONS, f"{reserved.count()} jobs have an expected start"
    assert not Job.objects.filter(name__startswith="big", stage=Stage.RENT, team=light).exists(), "a big job fitted"
    head = waiting.filter(name__startswith="big").order_by("queue_position").first()
    lines = [
        f"{'with policy: ' if policy else ''}{len(big)} jobs of {big_cores} cores then {args.jobs} 1-core jobs, "
        f"{args.nodes} nodes x {args.cores} cores half held (time limits 10 to {10 * per_node} min), {passes} passes",
        f"{'policy ' if policy else ''}reservation holds: {held} holds in {seconds:.3f} s; {reserved.count()} with "
        f"an expected start, e.g. {head.wait_reason if head else '-'}",
    ]
    if policy:
        # Batch outranks scavenger: scavenger's jobs are held only because batch's teams reach their cap.
        held_in = {
            q.name: Job.objects.filter(queue=q, team__in=teams, stage=Stage.RENT).count() for q in (batch, scavenger)
        }
        in_window = Hold.objects.filter(node__in=nodes[:10], released_at__isnull=True, job__team__in=teams)
        late = [
            h
            for h in in_window.select_related("job")
            if h.held_at + timedelta(seconds=h.job.time_limit_s) > window.starts_at
        ]
        assert not late, f"{len(late)} holds run into the maintenance window"
        lines.append(
            f"policy: held in batch {held_in['batch']} (a cap of 400 cores for each of {len(teams)} teams), in "
            f"scavenger {held_in['scavenger']}; {in_window.count()} holds on the window's "
            f"nodes, none running into it; {waiting.exclude(constraint='').count()} asking for features still wait"
        )
    return lines, held / seconds


def passes_until_done(nodes) -> tuple[int, int, float]:
    """Scheduler passes until no job waits or one holds nothing: (holds made, passes, seconds)."""
    from django.utils import timezone

    from jobs.lifecycle.actions import schedule_pass
    from jobs.models import Job, Stage
    from pool.models import Hold

    before = Hold.objects.count()
    passes = 0
    with Timer() as timer:
        while Job.objects.filter(stage=Stage.SUBMIT, held_back=False).exists():
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
