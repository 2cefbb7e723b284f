"""Arrays (issue 22), three parts in one run:

1. Throughput through the real stack (a Celery worker as the one node, real containers, as
   throughput.py): N trivial tasks (busybox `true`, 1 core) as one array, against N single trivial jobs
   submitted one by one, each side timed from its first submit until all its jobs are released
   (`array_tasks_per_s`, `single_jobs_per_s`, `array_vs_jobs_ratio`).
2. Submit: a 10,000-task array (`--submit-tasks`) with one small data file through jobs.submit.service.submit
   (and through POST /api/v1/arrays/ with DRF's test client, in this process), against as many Job rows
   inserted by bulk_create without our code (`array_submit_s`, `api_array_submit_s`, `anchor_bulk_create_s`
   and their ratios).
3. The scheduler pass, no containers, 100 fake nodes x 128 cores: passes until done over 10,000 waiting
   (`--pass-tasks`) independent jobs, over one array of as many tasks, and over one whose max_running holds
   most of them back (`pass_holds_per_s_jobs`, `pass_holds_per_s_array`, `pass_array_vs_jobs_ratio`); then
   the median pass over such an array held back by max_running=8 against one over an empty queue
   (`pass_held_back_ms`, `pass_empty_queue_ms`).

The worker is stopped after part 1; parts 2 and 3 count the runs a pass would queue instead of sending
them, and empty the job tables before each measurement so every side starts from the same database.
Prints the headline figures last, each beside its anchor and the ratio.
Run: .venv/bin/python bench/arrays.py [--tasks N] [--repeats N] [--submit-tasks N] [--pass-tasks N]
"""

import argparse
import statistics
import time

from _setup import Timer, machine, real_stack

HELD_BACK_MAX_RUNNING = 8


def declaration(team, image, name: str, files=()):
    """The trivial job of the benchmarks (as _setup.submit_trivial), as a declaration."""
    from jobs.submit.declaration import Declaration

    return Declaration(team=team, name=name, image=image, command=["true"], env={}, cpus=1, memory_mb=64, gpus=0,
                       time_limit_s=60, output_patterns=[], files=list(files))  # fmt: skip


def submit_array(team, user, image, name: str, count: int, *, max_running: int | None = None, files=()):
    from jobs.submit.arrays import ArrayRequest
    from jobs.submit.service import submit

    array = ArrayRequest(list(range(count)), max_running=max_running)
    return submit(declaration(team, image, name, files), user=user, array=array)[0]


def small_file():
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("params.csv", b"variant,lr\n0,0.01\n")


def wait_released(jobs, count: int, timeout: float) -> None:
    from jobs.models import Outcome, Stage

    deadline = time.monotonic() + timeout
    while jobs.exclude(stage=Stage.RELEASE).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"not every job was released in {timeout:.0f} s")
        time.sleep(0.05)
    succeeded = jobs.filter(outcome=Outcome.SUCCEEDED).count()
    assert succeeded == count, f"only {succeeded} of {count} succeeded"


# Part 1 ------------------------------------------------------------------------------------------


def throughput(team, user, image, tasks: int) -> tuple[float, float]:
    """Seconds for `tasks` single jobs, then for an array of as many tasks, through the real worker."""
    from _setup import submit_trivial

    from jobs.models import Job

    timeout = max(600.0, 2.0 * tasks)
    warm = submit_trivial(team, user, image, "warm-up")  # the first container pays for the image's layers
    wait_released(Job.objects.filter(pk=warm.pk), 1, 120)
    with Timer() as singles:
        for i in range(tasks):
            submit_trivial(team, user, image, f"trivial {i}")
        wait_released(Job.objects.filter(array__isnull=True, name__startswith="trivial "), tasks, timeout)
    with Timer() as array:
        made = submit_array(team, user, image, "trivial array", tasks)
        wait_released(Job.objects.filter(array=made), tasks, timeout)
    return singles.seconds, array.seconds


# Parts 2 and 3: no worker ------------------------------------------------------------------------


def without_worker(worker) -> list[str]:
    """Stop the worker, keep its node out of the passes, and count the runs a pass queues instead of sending them."""
    from jobs.scheduling import dispatch
    from pool.models import Node

    worker.stop()
    Node.objects.update(state=Node.State.DRAINING)
    sent: list[str] = []
    dispatch.send = lambda task, *, args=None, queue=None: sent.append(task)
    return sent


def empty_job_tables() -> None:
    """Every job, array, hold and what hangs on them gone, nodes and teams kept: each measurement starts alike."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobs_job, jobs_jobarray, pool_hold CASCADE")


def submit_times(team, user, image, repeats: int, tasks: int) -> dict[str, list[float]]:
    """Seconds to submit a `tasks`-task array (jobs.submit.arrays, then the API) and to bulk_create as many Job rows."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone
    from rest_framework.test import APIClient

    from jobs.models import Job
    from jobs.submit.arrays import INSERT_BATCH
    from teams.tokens import create_token

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {create_token(user, name='bench')}")
    form = {"name": "sweep", "image": image.name, "command": "true", "cpus": "1", "memory_mb": "64",
            "time_limit_s": "60", "indices": f"0-{tasks - 1}"}  # fmt: skip
    times: dict[str, list[float]] = {"anchor": [], "submit_array": [], "api": []}
    for _ in range(repeats):
        empty_job_tables()
        now = timezone.now()
        rows = [
            Job(team=team, submitted_by=user, name="sweep", image=image, command=["true"], cpus=1, memory_mb=64,
                time_limit_s=60, env={"E31_ARRAY_INDEX": str(i), "E31_ARRAY_SIZE": str(tasks)},
                array_index=i, submitted_at=now)
            for i in range(tasks)
        ]  # fmt: skip
        with Timer() as anchor:
            Job.objects.bulk_create(rows, batch_size=INSERT_BATCH)
        times["anchor"].append(anchor.seconds)
        empty_job_tables()
        with Timer() as ours:
            submit_array(team, user, image, "sweep", tasks, files=[("params.csv", small_file())])
        times["submit_array"].append(ours.seconds)
        empty_job_tables()
        with Timer() as posted:
            answer = api.post(
                "/api/v1/arrays/", {**form, "data": small_file()}, format="multipart", HTTP_HOST="localhost"
            )
        assert answer.status_code == 201, answer.content[:500]
        times["api"].append(posted.seconds)
    empty_job_tables()
    with CaptureQueriesContext(connection) as queries:
        submit_array(team, user, image, "sweep", tasks, files=[("params.csv", small_file())])
    times["queries"] = [float(len(queries))]
    return times


def register_nodes(count: int, cores: int) -> list:
    from django.utils import timezone

    from pool.nodes import Capacity, register

    now = timezone.now()
    capacity = Capacity(cpu_ids=list(range(cores)), memory_mb=512 * 1024, gpu_ids=[])
    return [register(f"fake{i:03d}", capacity, now=now) for i in range(count)]


def bulk_jobs(team, user, image, count: int) -> None:
    """Independent jobs as the scheduler bench makes them (one team here, as an array is)."""
    from django.utils import timezone

    from jobs.models import Job

    now = timezone.now()
    Job.objects.bulk_create(
        [
            Job(team=team, submitted_by=user, name=f"j{i}", image=image, command=["true"], cpus=1, memory_mb=64,
                time_limit_s=60, submitted_at=now)
            for i in range(count)
        ],
        batch_size=2000,
    )  # fmt: skip


def passes_until_done() -> tuple[int, int, float]:
    """Passes until no job waits or one holds nothing: (holds, passes that held, their seconds); a last
    pass that holds nothing is not counted, so a max_running array is not charged for finding its limit."""
    from django.utils import timezone

    from jobs.lifecycle.actions import schedule_pass
    from jobs.models import Job, Stage

    held = passes = 0
    seconds = 0.0
    while Job.objects.filter(stage=Stage.SUBMIT).exists():
        with Timer() as timer:
            made = len(schedule_pass(now=timezone.now()))
        if not made:
            break
        held, passes, seconds = held + made, passes + 1, seconds + timer.seconds
    return held, passes, seconds


def pass_rates(
    team, user, image, repeats: int, tasks: int, max_running: int
) -> dict[str, list[tuple[int, int, float]]]:
    """(holds, passes, seconds) of each side, the sides alternated `repeats` times."""
    runs: dict[str, list[tuple[int, int, float]]] = {"jobs": [], "array": [], "array_max_running": []}
    for _ in range(repeats):
        empty_job_tables()
        bulk_jobs(team, user, image, tasks)
        runs["jobs"].append(passes_until_done())
        empty_job_tables()
        submit_array(team, user, image, "pass array", tasks)
        runs["array"].append(passes_until_done())
        empty_job_tables()
        submit_array(team, user, image, "pass array", tasks, max_running=max_running)
        runs["array_max_running"].append(passes_until_done())
    return runs


def quiet_passes(count: int) -> tuple[list[float], int]:
    """Seconds of `count` passes that hold nothing, and the queries of one."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from jobs.lifecycle.actions import schedule_pass

    seconds = []
    for _ in range(count):
        with Timer() as timer:
            assert not schedule_pass(now=timezone.now())
        seconds.append(timer.seconds)
    with CaptureQueriesContext(connection) as queries:
        schedule_pass(now=timezone.now())
    return seconds, len(queries)


def held_back_pass(team, user, image, tasks: int, count: int) -> dict[str, tuple[list[float], int]]:
    """`count` passes over an empty queue, then as many over an array of `tasks` tasks with max_running=8 once
    its 8 are held."""
    from jobs.models import Job

    empty_job_tables()
    empty = quiet_passes(count)
    array = submit_array(team, user, image, "held back", tasks, max_running=HELD_BACK_MAX_RUNNING)
    held, _, _ = passes_until_done()
    assert held == HELD_BACK_MAX_RUNNING, f"{held} tasks held"
    assert Job.objects.filter(array=array, held_back=True).count() == tasks - HELD_BACK_MAX_RUNNING
    return {"empty": empty, "held_back": quiet_passes(count)}


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=1000, help="tasks of the array and single jobs of part 1")
    parser.add_argument("--repeats", type=int, default=3, help="runs of parts 2 and 3 (medians)")
    parser.add_argument("--submit-tasks", type=int, default=10_000, help="tasks of the array submitted in part 2")
    parser.add_argument("--pass-tasks", type=int, default=10_000, help="waiting jobs or tasks of part 3")
    parser.add_argument("--quiet-passes", type=int, default=15, help="passes holding nothing timed, for each median")
    parser.add_argument("--nodes", type=int, default=100, help="fake nodes of part 3")
    parser.add_argument("--cores", type=int, default=128, help="cores per fake node")
    args = parser.parse_args()
    team, user, image = real_stack("e31_bench_arrays")
    from tests.workers import RUNNING

    singles_s, array_s = throughput(team, user, image, args.tasks)
    sent = without_worker(RUNNING[-1])  # the worker real_stack started

    submits = submit_times(team, user, image, args.repeats, args.submit_tasks)
    register_nodes(args.nodes, args.cores)
    max_running = args.pass_tasks // 10
    rates = pass_rates(team, user, image, args.repeats, args.pass_tasks, max_running)
    quiet = held_back_pass(team, user, image, args.pass_tasks, args.quiet_passes)

    def per_s(side: str) -> float:
        return statistics.median(held / seconds for held, _, seconds in rates[side])

    jobs_rate, array_rate, limited_rate = per_s("jobs"), per_s("array"), per_s("array_max_running")
    submit_s, api_s, anchor_s = (statistics.median(submits[k]) for k in ("submit_array", "api", "anchor"))
    empty_ms, held_back_ms = (statistics.median(quiet[k][0]) for k in ("empty", "held_back"))
    submit_tasks, pass_tasks = f"{args.submit_tasks} tasks", f"{args.pass_tasks} waiting"
    print(machine())
    print(f"part 1: {args.tasks} single jobs in {singles_s:.2f} s, an array of {args.tasks} tasks in {array_s:.2f} s")
    print(
        f"part 2, {submit_tasks}, one 18-byte data file, {int(submits['queries'][0])} queries; runs (s): "
        f"submit_array {' '.join(f'{s:.3f}' for s in submits['submit_array'])}, "
        f"POST /api/v1/arrays/ {' '.join(f'{s:.3f}' for s in submits['api'])}, "
        f"anchor {' '.join(f'{s:.3f}' for s in submits['anchor'])}"
    )
    print(f"part 3: {args.nodes} fake nodes x {args.cores} cores, {pass_tasks}; runs (holds, passes, s):")
    for side, label in (("jobs", "jobs"), ("array", "array"), ("array_max_running", f"max_running={max_running}")):
        print(f"  {label}: " + ", ".join(f"{h} {p} {s:.3f}" for h, p, s in rates[side]))
    print(
        f"passes holding nothing, median of {args.quiet_passes}: empty queue {ms(empty_ms)} ms "
        f"({quiet['empty'][1]} queries), "
        f"{args.pass_tasks - HELD_BACK_MAX_RUNNING} tasks held back by max_running={HELD_BACK_MAX_RUNNING} "
        f"{ms(held_back_ms)} ms ({quiet['held_back'][1]} queries)"
    )
    print(f"runs queued by the passes of parts 2 and 3 (not sent): {sent.count('worker.run')}")
    print(f"single_jobs_per_s: {args.tasks / singles_s:.2f} jobs/s")
    print(f"array_tasks_per_s: {args.tasks / array_s:.2f} tasks/s")
    print(f"array_vs_jobs_ratio: {singles_s / array_s:.2f}")
    print(f"anchor_bulk_create_s: {anchor_s:.3f} s ({submit_tasks})")
    print(f"array_submit_s: {submit_s:.3f} s ({submit_tasks})")
    print(f"array_submit_vs_anchor_ratio: {submit_s / anchor_s:.2f}")
    print(f"api_array_submit_s: {api_s:.3f} s ({submit_tasks})")
    print(f"api_array_submit_vs_anchor_ratio: {api_s / anchor_s:.2f}")
    print(f"pass_holds_per_s_jobs: {jobs_rate:.0f} holds/s ({pass_tasks})")
    print(f"pass_holds_per_s_array: {array_rate:.0f} holds/s")
    print(f"pass_array_vs_jobs_ratio: {array_rate / jobs_rate:.2f}")
    print(f"pass_holds_per_s_array_max_running: {limited_rate:.0f} holds/s (max_running={max_running})")
    print(f"pass_array_max_running_vs_jobs_ratio: {limited_rate / jobs_rate:.2f}")
    print(f"pass_empty_queue_ms: {ms(empty_ms)} ms")
    print(f"pass_held_back_ms: {ms(held_back_ms)} ms ({pass_tasks}, max_running={HELD_BACK_MAX_RUNNING})")
    print(f"pass_held_back_vs_empty_ratio: {held_back_ms / empty_ms:.2f}")


if __name__ == "__main__":
    main()
