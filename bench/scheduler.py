"""Scheduler throughput: 10,000 waiting 1-core jobs over 100 registered nodes, no containers.

Prints `holds_per_s` last. Run: .venv/bin/python bench/scheduler.py [--jobs N] [--nodes N]
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
    from django.utils import timezone

    from jobs import dispatch
    from jobs.actions import schedule_pass
    from jobs.models import Job, RuntimeImage, Stage
    from pool.models import Hold
    from pool.nodes import Capacity, register
    from teams.models import Team

    now = timezone.now()
    for i in range(args.nodes):
        register(f"n{i:03d}", Capacity(cpu_ids=list(range(args.cores)), memory_mb=512 * 1024, gpu_ids=[]), now=now)
    teams = [Team.objects.create(slug=f"t{i}", name=f"t{i}") for i in range(10)]
    user = get_user_model().objects.create(username="bench")
    image = RuntimeImage.objects.create(name="busybox", reference="e31/busybox:1")
    Job.objects.bulk_create(
        [
            Job(team=teams[i % len(teams)], submitted_by=user, name=f"j{i}", image=image, command=["true"],
                cpus=1, memory_mb=64, time_limit_s=60, submitted_at=now)
            for i in range(args.jobs)
        ],
        batch_size=2000,
    )  # fmt: skip

    # The runs each pass queues to its nodes are counted, not sent: no worker would take them here.
    sent: list[str] = []
    dispatch.send = lambda task, *, args=None, queue=None: sent.append(task)
    passes = 0
    with Timer() as timer:
        while Job.objects.filter(stage=Stage.SUBMIT).exists():
            made = schedule_pass(now=timezone.now())
            passes += 1
            if not made:
                break
    held = Hold.objects.count()
    cores = sorted(Hold.objects.values_list("node_id", "cpu_set"))
    assert len({(n, tuple(c)) for n, c in cores}) == held, "a core was held twice"
    print(machine())
    print(f"{args.jobs} jobs, {args.nodes} nodes x {args.cores} cores, {passes} passes")
    print(f"holds: {held} holds, runs queued: {sent.count(dispatch.RUN_TASK)}")
    print(f"seconds: {timer.seconds:.3f} s")
    print(f"holds_per_s: {held / timer.seconds:.0f} holds/s")


if __name__ == "__main__":
    main()
