"""Schedules (issues 23 and 34): N schedules due in the same minute, each run recorded and submitted exactly once,
by passes whose cost is bounded whatever N.

1. In this process, passes of at most E31_SCHEDULES_PER_PASS schedules (schedules.runs.due_pass) until every
   schedule's run is recorded: the first pass timed (`pass_s`, `pass_runs_per_s`, the queries of one run),
   the passes counted (beat sends one every E31_SCHEDULES_EVERY_S), against as many Job rows as that pass
   recorded inserted by bulk_create without our code (`anchor_bulk_create_s`, `pass_vs_anchor_ratio`). The
   schedules belong to teams of at most E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE each, so every run is
   submitted. With --profiled N, the profile of one more pass, over N schedules, is printed.
2. One team at its caps: E31_TEAM_MAX_SCHEDULES schedules due in the same minute, of which
   E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE are submitted and the others refused (the passes' seconds, and the
   cost of one refused run).
3. Through a real Celery worker (as the pool runs it: the task schedules.due, sent again once the last pass
   is done, as beat would every E31_SCHEDULES_EVERY_S): each pass's seconds from sending it until its runs
   are recorded (`due_minute_s`, the longest, beside `pass_s`: `due_minute_vs_pass_ratio`), and the CPU
   seconds by process.
4. With --trivial, the node taking jobs (busybox; E31_PROBE_ON_START=0): another team's trivial job from submit
   to release, alone and then submitted with the pass over one team at its caps, all due in the same minute
   (whose submitted runs run too).

Each side checks its rows: one run per schedule, one job per submitted run. Until 4, the worker's node is
drained, so the scheduler holds none of the submitted jobs (10,000 containers would measure something else).
Prints the headline figures last, each beside its anchor and the ratio.
Run: .venv/bin/python bench/schedules.py [--schedules N] [--profiled N] [--concurrency N] [--trivial]
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


def make_schedules(owners, count: int, planned) -> None:
    """`count` schedules due at `planned`, a time of their cron line, shared out between `owners` ((team, user)
    pairs) in turn, each with a job of its own (their next time is a day later)."""
    from schedules.models import Schedule

    Schedule.objects.all().delete()
    line = f"{planned.minute} {planned.hour} * * *"
    rows = []
    for i in range(count):
        team, user = owners[i % len(owners)]
        rows.append(Schedule(team=team, name=f"s{i}", cron=line, time_zone="UTC", job=JOB | {"name": f"nightly {i}"},
                             created_by=user, created_at=planned, changed_at=planned, next_run_at=planned))  # fmt: skip
    Schedule.objects.bulk_create(rows, batch_size=2000)


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


def check(count: int, submitted: int) -> None:
    """One run per schedule, `submitted` of them submitted with a job of their own, the others refused."""
    from django.db.models import Count

    from jobs.models import Job
    from schedules.models import ScheduleRun

    runs = ScheduleRun.objects.count()
    made = ScheduleRun.objects.filter(status="submitted", job__isnull=False).count()
    refused = ScheduleRun.objects.filter(status="refused").count()
    per_schedule = ScheduleRun.objects.values("schedule").annotate(n=Count("pk")).filter(n__gt=1).count()
    jobs = Job.objects.count()
    found = (runs, made, refused, per_schedule, jobs)
    assert found == (count, submitted, count - submitted, 0, submitted), found


def minute_floor(at):
    return at.replace(second=0, microsecond=0)


def owners_of(count: int):
    """`count` teams, each with a member: (team, user) pairs."""
    from teams.people import add_member, create_team

    found = []
    for n in range(count):
        team, _ = create_team(f"bench{n}")
        found.append((team, add_member(f"bench{n}", team=team)))
    return found


def in_process(owners, count: int, profiled: int) -> tuple[float, int, int, int, str]:
    """Seconds of the first pass and the runs it recorded, the passes until `count` schedules are recorded, the
    queries of one run, and the profile of one pass over `profiled` schedules (none when 0)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from schedules import runs

    planned = minute_floor(timezone.now())
    make_schedules(owners, 1, planned)
    with CaptureQueriesContext(connection) as queries:
        assert runs.due_pass(now=planned + timedelta(seconds=1)) == 1
    empty_tables()
    text = io.StringIO()
    if profiled:
        make_schedules(owners, profiled, planned)
        profile = cProfile.Profile()
        profile.enable()
        runs.due_pass(now=planned + timedelta(seconds=1))
        profile.disable()
        pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(35)
        empty_tables()
    make_schedules(owners, count, planned)
    with Timer() as first:
        recorded, passes = runs.due_pass(now=planned + timedelta(seconds=1)), 1
    first_runs = recorded
    while recorded < count:
        recorded += runs.due_pass(now=planned + timedelta(seconds=1))
        passes += 1
    check(count, count)
    return first.seconds, first_runs, passes, len(queries), text.getvalue()


def team_at_cap(owner) -> tuple[float, float]:
    """Seconds of the passes recording one team's E31_TEAM_MAX_SCHEDULES schedules due at once, and of one
    refused run (those past E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE) beside a submitted one."""
    from django.conf import settings
    from django.utils import timezone

    from schedules import runs

    count, allowed = settings.E31_TEAM_MAX_SCHEDULES, settings.E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE
    planned = minute_floor(timezone.now())
    empty_tables()
    make_schedules([owner], count, planned)
    with Timer() as timer:
        recorded = 0
        while recorded < count:
            recorded += runs.due_pass(now=planned + timedelta(seconds=1))
    check(count, min(count, allowed))
    # Refused runs alone: the team's minute already at its cap.
    empty_tables()
    make_schedules([owner], allowed + 200, planned)
    at = planned + timedelta(seconds=1)
    runs.record_due(runs.due_ids(now=at, most=allowed), now=at)
    with Timer() as refused:
        runs.record_due(runs.due_ids(now=at, most=200), now=at)
    check(allowed + 200, allowed)
    empty_tables()
    return timer.seconds, refused.seconds / 200 * 1000


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


def through_worker(owners, count: int, worker) -> tuple[list[float], dict[str, float]]:
    """Each pass's seconds from sending schedules.due until its runs are recorded (the next sent once the last
    is done, as beat would send it), and the CPU seconds by process."""
    from celery import current_app
    from django.conf import settings
    from django.utils import timezone

    from schedules import runs
    from schedules.models import ScheduleRun

    empty_tables()
    make_schedules(owners, count, minute_floor(timezone.now()))
    groups = {worker.process.pid: "celery worker"}
    before = cpu_by_process(groups)
    seconds: list[float] = []
    bound_s = settings.E31_SCHEDULES_EVERY_S * runs.PASS_SHARE
    while (done := ScheduleRun.objects.count()) < count:
        expected = min(count, done + settings.E31_SCHEDULES_PER_PASS)
        started = last = time.perf_counter()
        current_app.send_task("schedules.due")
        # Done when its bound of schedules is recorded, or, stopped by its time bound (its last chunk commits
        # at most one schedule after it), when nothing more comes.
        while (found := ScheduleRun.objects.count()) < expected:
            now = time.perf_counter()
            if found > done:
                done, last = found, now
            elif now - started > bound_s + 2 and now - last > 1:
                break
            if now > started + 120:
                raise SystemExit(f"a pass did not record {expected - done} runs in 120 s")
            time.sleep(0.05)
        else:
            last = time.perf_counter()
        seconds.append(last - started)
    after = cpu_by_process(groups)
    used = {name: after[name] - before.get(name, 0.0) for name in after if after[name] - before.get(name, 0.0) > 0.5}
    check(count, count)
    return seconds, used


def trivial_beside_team_at_cap(owners, image, tries: int = 3) -> tuple[list[float], list[float]]:
    """Seconds from submit to release of another team's trivial job, alone, then sent right after schedules.due
    over one team's E31_TEAM_MAX_SCHEDULES schedules all due in that minute; `tries` of each."""
    from _setup import submit_trivial
    from celery import current_app
    from django.conf import settings
    from django.utils import timezone

    from jobs.models import Job, Stage
    from pool.models import Node
    from schedules.models import ScheduleRun

    def released(job) -> float:
        started = time.perf_counter()
        while not Job.objects.filter(pk=job.pk, stage=Stage.RELEASE).exists():
            if time.perf_counter() > started + 120:
                raise SystemExit(f"the trivial job {job.pk} was not released in 120 s")
            time.sleep(0.02)
        return time.perf_counter() - started

    def all_released() -> None:
        deadline = time.perf_counter() + 300
        while Job.objects.exclude(stage=Stage.RELEASE).exists():
            if time.perf_counter() > deadline:
                raise SystemExit("the schedules' jobs were not all released in 300 s")
            time.sleep(0.2)

    (team, user), (other, someone) = owners[0], owners[1]
    empty_tables()
    Node.objects.update(state=Node.State.ACTIVE)
    alone, beside = [], []
    for n in range(tries):
        started = time.perf_counter()
        job = submit_trivial(other, someone, image, f"alone {n}")
        released(job)
        alone.append(time.perf_counter() - started)
    count = settings.E31_TEAM_MAX_SCHEDULES
    for n in range(tries):
        make_schedules([(team, user)], count, minute_floor(timezone.now()))
        current_app.send_task("schedules.due")
        started = time.perf_counter()
        job = submit_trivial(other, someone, image, f"beside {n}")
        released(job)
        beside.append(time.perf_counter() - started)
        while ScheduleRun.objects.filter(schedule__team=team).count() < count:
            time.sleep(0.1)
        all_released()
        empty_tables()
    Node.objects.update(state=Node.State.DRAINING)
    return alone, beside


def stack(concurrency: int, schedules: int):
    """As _setup.real_stack, with `concurrency` worker processes and the image registered, not built: no job runs;
    teams of at most E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE schedules each, so every run is submitted."""
    os.environ["CELERY_BROKER_URL"] = f"redis://127.0.0.1:6379/{BROKER_DB}"
    os.environ["E31_PROBE_ON_START"] = "0"  # the node takes jobs at once (--trivial)
    throwaway_database("e31_bench_schedules")
    from django.conf import settings

    from jobs.models import RuntimeImage

    owners = owners_of(max(2, -(-schedules // settings.E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE)))
    image = RuntimeImage.objects.create(name="busybox", reference="e31/busybox:1")
    return owners, image, start_worker(concurrency=concurrency)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument(
        "--profiled", type=int, default=0, metavar="N", help="print the profile of an in-process pass over N schedules"
    )
    parser.add_argument(
        "--concurrency", type=int, default=(os.cpu_count() or 1) + 2, help="worker processes (the default)"
    )
    parser.add_argument("--trivial", action="store_true", help="time another team's trivial job (runs containers)")
    args = parser.parse_args()
    owners, image, worker = stack(args.concurrency, args.schedules)
    from django.conf import settings

    from pool.models import Node
    from schedules import runs

    Node.objects.update(state=Node.State.DRAINING)  # the scheduler holds none of the jobs submitted

    pass_s, pass_runs, passes, queries, profile = in_process(owners, args.schedules, args.profiled)
    anchor_s = anchor(*owners[0], image, pass_runs)  # as many rows as the timed pass recorded
    cap_s, refused_ms = team_at_cap(owners[0])
    worker_s, used = through_worker(owners, args.schedules, worker)
    trivial = trivial_beside_team_at_cap(owners, image) if args.trivial else None
    every_s = settings.CELERY_BEAT_SCHEDULE["schedules"]["schedule"]
    per_pass, allowed = settings.E31_SCHEDULES_PER_PASS, settings.E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE

    print(machine())
    if profile:
        print(f"profile of a pass over {args.profiled} schedules:")
        print(profile)
    print(f"in-process: {args.schedules} schedules of {len(owners)} teams, {passes} passes of at most {per_pass} "
          f"({passes * every_s / 60:.1f} min of beat, one pass every {every_s:.0f} s), {queries} queries a run; "
          f"the first pass {pass_s / every_s:.0%} of a process")  # fmt: skip
    print(f"a team at its caps: its passes {cap_s:.2f} s (E31_TEAM_MAX_SCHEDULES={settings.E31_TEAM_MAX_SCHEDULES}, "
          f"{allowed} submitted), a refused run {refused_ms:.1f} ms")  # fmt: skip
    print("through the worker, CPU seconds by process: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(used.items())))
    print(f"through the worker, each pass: {', '.join(f'{s:.2f}' for s in worker_s[:12])}"
          f"{' …' if len(worker_s) > 12 else ''} s")  # fmt: skip
    print(f"worker concurrency: {args.concurrency}")
    if trivial is not None:
        alone, beside = trivial
        print(f"another team's trivial job, submit to release: alone {max(alone):.2f} s (the longest of "
              f"{', '.join(f'{t:.2f}' for t in alone)}), beside a team at its caps {max(beside):.2f} s "
              f"(the longest of {', '.join(f'{t:.2f}' for t in beside)})")  # fmt: skip
    print(f"anchor_bulk_create_s: {anchor_s:.3f} s ({pass_runs} Job rows)")
    print(f"pass_s: {pass_s:.2f} s ({pass_runs} schedules; E31_SCHEDULES_PER_PASS={per_pass}, stops after "
          f"{every_s * runs.PASS_SHARE:.0f} s)")  # fmt: skip
    print(f"pass_runs_per_s: {pass_runs / pass_s:.0f} runs/s")
    print(f"pass_vs_anchor_ratio: {pass_s / anchor_s:.1f}")
    print(f"due_minute_s: {max(worker_s):.2f} s (the longest pass through the worker, of {len(worker_s)})")
    print(f"due_minute_vs_pass_ratio: {max(worker_s) / pass_s:.2f}")


if __name__ == "__main__":
    main()
