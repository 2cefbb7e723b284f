"""Schedules (issue 23): N schedules due in the same minute, each run recorded and submitted exactly once.

1. In this process, one due pass over every schedule (schedules.runs.due_pass), timed, with the queries of
   one run and a profile of a sample of runs (`pass_runs_per_s`), against N Job rows inserted by bulk_create
   without our code (`anchor_bulk_create_s`, `pass_vs_anchor_ratio`).
2. Through a real Celery worker (as the pool runs it: the task schedules.due, which fans batches out to the
   worker's processes): from sending the task until every schedule's run is recorded
   (`due_minute_s`, met when under 45 s: beat's 15 s interval plus this stays within 60 s of the planned time).

Each side checks its rows: one run per schedule, one job per run. The worker's node is drained, so the scheduler
holds none of the submitted jobs (10,000 containers would measure something else).
Prints the headline figures last. Run: .venv/bin/python bench/schedules.py [--schedules N] [--concurrency N]
"""

import argparse
import cProfile
import io
import os
import pstats
import time
from datetime import timedelta

from _setup import BROKER_DB, Timer, cpu_by_process, machine, start_worker, throwaway_database

JOB = {"name": "nightly", "image": "busybox", "command": ["true"], "cpus": 1, "memory_mb": 64, "time_limit_s": 60}
WITHIN_S = 45.0


def make_schedules(team, user, count: int, planned):
    """`count` schedules due at `planned`, a time of their cron line, each with a job of its own (their next
    time is a day later: a pass that takes longer than a minute finds no second time due)."""
    from schedules.models import Schedule

    Schedule.objects.all().delete()
    line = f"{planned.minute} {planned.hour} * * *"
    Schedule.objects.bulk_create(
        [
            Schedule(team=team, name=f"s{i}", cron=line, time_zone="UTC", job=JOB | {"name": f"nightly {i}"},
                     created_by=user, created_at=planned, changed_at=planned, next_run_at=planned)
            for i in range(count)
        ],
        batch_size=2000,
    )  # fmt: skip


def empty_tables() -> None:
    """Every run and job gone, schedules and teams kept; retried, as the worker's scheduler passes (nudged by
    the submissions) may hold a lock the TRUNCATE then deadlocks with."""
    from django.db import OperationalError, connection

    for _ in range(20):
        try:
            with connection.cursor() as cursor:
                cursor.execute("TRUNCATE schedules_schedulerun, jobs_job, jobs_jobarray, pool_hold CASCADE")
            return
        except OperationalError:
            time.sleep(0.5)
    raise SystemExit("could not empty the job tables")


def check(count: int) -> None:
    """One submitted run per schedule, each with its own job."""
    from django.db.models import Count

    from jobs.models import Job
    from schedules.models import ScheduleRun

    runs = ScheduleRun.objects.count()
    submitted = ScheduleRun.objects.filter(status="submitted", job__isnull=False).count()
    per_schedule = ScheduleRun.objects.values("schedule").annotate(n=Count("pk")).filter(n__gt=1).count()
    jobs = Job.objects.count()
    assert (runs, submitted, per_schedule, jobs) == (count, count, 0, count), (runs, submitted, per_schedule, jobs)


def minute_floor(at):
    return at.replace(second=0, microsecond=0)


def in_process(team, user, count: int, profiled: int) -> tuple[float, int, str]:
    """Seconds of one due pass over `count` schedules; the queries of one run; the profile of `profiled` runs."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from schedules import runs

    planned = minute_floor(timezone.now())
    make_schedules(team, user, 1, planned)
    with CaptureQueriesContext(connection) as queries:
        assert runs.due_pass(now=planned + timedelta(seconds=1)) == 1
    empty_tables()
    make_schedules(team, user, profiled, planned)
    profile = cProfile.Profile()
    profile.enable()
    runs.due_pass(now=planned + timedelta(seconds=1))
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(35)
    empty_tables()
    make_schedules(team, user, count, planned)
    with Timer() as timer:
        recorded = runs.due_pass(now=planned + timedelta(seconds=1))
    assert recorded == count, recorded
    check(count)
    return timer.seconds, len(queries), text.getvalue()


def anchor(team, user, image, count: int) -> float:
    from django.utils import timezone

    from jobs.models import Job

    empty_tables()
    now = timezone.now()
    rows = [
        Job(team=team, submitted_by=user, name="nightly", image=image, command=["true"], cpus=1, memory_mb=64,
            time_limit_s=60, submitted_at=now)
        for _ in range(count)
    ]  # fmt: skip
    with Timer() as timer:
        Job.objects.bulk_create(rows, batch_size=2000)
    empty_tables()
    return timer.seconds


def through_worker(team, user, count: int, worker) -> tuple[float, dict[str, float]]:
    """Seconds from sending schedules.due until every run is recorded, and the CPU seconds by process."""
    from celery import current_app
    from django.utils import timezone

    from schedules.models import ScheduleRun

    empty_tables()
    make_schedules(team, user, count, minute_floor(timezone.now()))
    groups = {worker.process.pid: "celery worker"}
    before = cpu_by_process(groups)
    started = time.perf_counter()
    current_app.send_task("schedules.due")
    deadline = started + 300
    while ScheduleRun.objects.count() < count:
        if time.perf_counter() > deadline:
            raise SystemExit(f"only {ScheduleRun.objects.count()} of {count} runs recorded in 300 s")
        time.sleep(0.1)
    seconds = time.perf_counter() - started
    after = cpu_by_process(groups)
    used = {name: after[name] - before.get(name, 0.0) for name in after if after[name] - before.get(name, 0.0) > 0.5}
    check(count)
    return seconds, used


def stack(concurrency: int):
    """As _setup.real_stack, with `concurrency` worker processes and the image registered, not built: no job runs."""
    os.environ["CELERY_BROKER_URL"] = f"redis://127.0.0.1:6379/{BROKER_DB}"
    throwaway_database("e31_bench_schedules")
    from jobs.models import RuntimeImage
    from teams.people import add_member, create_team

    team, _ = create_team("bench")
    user = add_member("bench", team=team)
    image = RuntimeImage.objects.create(name="busybox", reference="e31/busybox:1")
    return team, user, image, start_worker(concurrency=concurrency)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument(
        "--concurrency", type=int, default=(os.cpu_count() or 1) + 2, help="worker processes (the default)"
    )
    parser.add_argument("--profile", action="store_true", help="print the profile of the in-process pass")
    parser.add_argument("--profiled", type=int, default=300, help="schedules of the profiled pass")
    args = parser.parse_args()
    team, user, image, worker = stack(args.concurrency)
    from pool.models import Node

    Node.objects.update(state=Node.State.DRAINING)  # the scheduler holds none of the jobs submitted

    anchor_s = anchor(team, user, image, args.schedules)
    pass_s, queries, profile = in_process(team, user, args.schedules, args.profiled)
    worker_s, used = through_worker(team, user, args.schedules, worker)

    print(machine())
    if args.profile:
        print(profile)
    print(f"in-process pass: {args.schedules} runs in {pass_s:.2f} s, {queries} queries a run")
    print("through the worker, CPU seconds by process: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(used.items())))
    print(f"worker concurrency: {args.concurrency}")
    print(f"due minute met: {'yes' if worker_s <= WITHIN_S else 'no'} (under {WITHIN_S:.0f} s)")
    print(f"anchor_bulk_create_s: {anchor_s:.3f} s ({args.schedules} Job rows)")
    print(f"pass_s: {pass_s:.3f} s ({args.schedules} runs)")
    print(f"pass_runs_per_s: {args.schedules / pass_s:.0f} runs/s")
    print(f"pass_vs_anchor_ratio: {pass_s / anchor_s:.1f}")
    print(f"due_minute_s: {worker_s:.1f} s (the same runs through the worker)")
    print(f"due_minute_vs_pass_ratio: {worker_s / pass_s:.2f}")


if __name__ == "__main__":
    main()
