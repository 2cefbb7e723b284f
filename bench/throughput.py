"""Throughput: 100 trivial jobs (busybox `true`, 1 core) submitted at once through the real stack
(PostgreSQL, Redis, a Celery worker as the node, real containers), until all are released.

Prints `jobs_per_s` last. Needs dockerd, Redis and PostgreSQL.
"""

import argparse
import time

from _setup import Timer, machine, real_stack, submit_trivial


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100)
    args = parser.parse_args()
    team, user, image = real_stack("e31_bench_throughput")

    from jobs.models import Job, Outcome, Stage

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
    print(machine())
    print(f"{args.jobs} jobs on one node with {len(Job.objects.first().holds.first().node.cpu_ids)} cores")
    print(f"seconds: {timer.seconds:.2f} s")
    print(f"jobs_per_s: {args.jobs / timer.seconds:.2f} jobs/s")


if __name__ == "__main__":
    main()
