"""Throughput: 100 trivial jobs (busybox `true`, 1 core) submitted at once through the real stack
(PostgreSQL, Redis, a Celery worker as the node, real containers), until all are released; then,
in the same run, the same containers straight through the docker SDK (create, start, wait, remove,
with the same isolation flags) at the same concurrency: as many at once as the node runs jobs (one
per held core, at most the worker's concurrency), each pinned to its own core.

Prints where a job's time went on its core (the median of each step, from the rows' own times: held to started
on the node, the run, finished to released, then the core's release to its next hold), and `jobs_per_s`,
`raw_sdk_jobs_per_s` and `throughput_ratio` (ours / raw) last.
Needs dockerd, Redis and PostgreSQL.
"""

import argparse
import itertools
import statistics
import threading
import time

from _setup import NAMESPACE, Timer, machine, real_stack, submit_trivial

WORKER_CONCURRENCY = 4  # _setup.start_worker's default


def raw_sdk_run(client, image: str, cpuset: str) -> None:
    """One trivial container as a job's sandbox runs it, without our system around it."""
    container = client.containers.create(
        image, ["true"], network_mode="none", read_only=True, cap_drop=["ALL"], user="10001:10001",
        security_opt=["no-new-privileges"], ipc_mode="private", cpuset_cpus=cpuset,
        mem_limit="64m", memswap_limit="64m", pids_limit=256, tmpfs={"/tmp": "rw,nosuid,nodev,size=64m"},
        labels={"e31.namespace": NAMESPACE},
    )  # fmt: skip
    try:
        container.start()
        container.wait()
    finally:
        container.remove(force=True)


def raw_sdk(image: str, *, jobs: int, cpu_ids: list[int]) -> float:
    """Seconds to run `jobs` trivial containers, one thread per core, each pinned to its core."""
    import docker

    client = docker.from_env()
    raw_sdk_run(client, image, str(cpu_ids[0]))  # warm: the first container pays for the image's layers
    counter = itertools.count()
    errors: list[BaseException] = []

    def worker(core: int) -> None:
        try:
            while next(counter) < jobs:
                raw_sdk_run(client, image, str(core))
        except BaseException as error:  # reported after the join
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(core,)) for core in cpu_ids]
    with Timer() as timer:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    return timer.seconds


def breakdown(jobs) -> dict[str, float]:
    """Median milliseconds of each step of a job's time on its core: the node's start (held → started), the run
    (started → finished: the container made, run and gone), the end (finished → released: outputs, log and
    record), and the core idle between a release and its next hold (the scheduler pass and the hops to it)."""
    from pool.models import Hold

    def ms(later, earlier) -> float:
        return (later - earlier).total_seconds() * 1000

    steps: dict[str, list[float]] = {"held_to_started": [], "run": [], "finished_to_released": [], "core_idle": []}
    for job in jobs:
        steps["held_to_started"].append(ms(job.started_at, job.held_at))
        steps["run"].append(ms(job.finished_at, job.started_at))
        steps["finished_to_released"].append(ms(job.released_at, job.finished_at))
    by_core: dict[tuple[int, int], list[Hold]] = {}
    for hold in Hold.objects.filter(job__in=jobs).order_by("held_at"):
        for core in hold.cpu_set:
            by_core.setdefault((hold.node_id, core), []).append(hold)
    for holds in by_core.values():
        steps["core_idle"] += [ms(after.held_at, before.released_at) for before, after in itertools.pairwise(holds)]
    return {step: statistics.median(values) for step, values in steps.items() if values}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100)
    args = parser.parse_args()
    team, user, image = real_stack("e31_bench_throughput")

    from jobs.models import Job, Outcome, Stage
    from pool.models import Node

    with Timer() as timer:
        for i in range(args.jobs):
            submit_trivial(team, user, image, f"trivial {i}")
        deadline = time.monotonic() + 600
        while Job.objects.exclude(stage=Stage.RELEASE).exists():
            if time.monotonic() > deadline:
                raise SystemExit("not every job was released in 10 minutes")
            time.sleep(0.05)
    succeeded = Job.objects.filter(outcome=Outcome.SUCCEEDED).count()
    assert succeeded == args.jobs, f"only {succeeded} of {args.jobs} succeeded"
    node = Node.objects.get(holds__job__in=Job.objects.all()[:1])
    cpu_ids = node.cpu_ids[:WORKER_CONCURRENCY]  # 1-core jobs: one at a time per core, at most one per process
    raw_seconds = raw_sdk(image.reference, jobs=args.jobs, cpu_ids=cpu_ids)
    ours, raw = args.jobs / timer.seconds, args.jobs / raw_seconds
    print(machine())
    print(f"{args.jobs} jobs on one node with {len(node.cpu_ids)} cores; the SDK ran {len(cpu_ids)} at a time")
    print(f"ours took {timer.seconds:.2f} s, the raw SDK {raw_seconds:.2f} s")
    steps = breakdown(list(Job.objects.all()))
    print("a job's time on its core, median ms: " + ", ".join(f"{step} {ms:.0f}" for step, ms in steps.items()))
    print(f"jobs_per_s: {ours:.2f} jobs/s")
    print(f"raw_sdk_jobs_per_s: {raw:.2f} jobs/s")
    print(f"throughput_ratio: {ours / raw:.2f}")


if __name__ == "__main__":
    main()
