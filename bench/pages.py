"""Server time of the pages people open every morning, on a pool with history.

100,000 released jobs with their holds and records (10 teams of 5 people, 50 nodes of 64 cores, over the
last 90 days; outcomes mixed as a real night's are; 108 job names, so each name has a history of runs for
the run strips; every job that did not succeed with a ten-line failure excerpt), plus 300 running jobs
holding cores, 500 waiting ones and a judged round of isolation probes on every node, are written straight
into PostgreSQL with bulk inserts (not through the lifecycle: the lifecycle has its own benchmarks). Then
each page is requested in this process through Django's test Client (the whole middleware stack, the view,
its queries, the template): five rounds to warm up, then `--requests` rounds of every page once. The median
and the 95th percentile of the wall time of each request are reported, beside a plain `SELECT … WHERE id =
…` on the jobs table measured in the same rounds (the anchor) and each page's median as a multiple of the
anchor's (medians: a p95 of a sub-millisecond query is mostly the machine's noise). A page that does not
answer 200 stops the benchmark.

Prints `anchor_select_ms` (the anchor's median), then per page `<page>_p95_ms: N ms` and
`<page>_vs_anchor_ratio` (medians) last. `BENCH_PROFILE=<page>` (and `BENCH_SORT`, `BENCH_FILTER`)
prints where that page's time goes (cProfile, and its slowest queries) before them.
Run: .venv/bin/python bench/pages.py [--jobs N] [--requests N]
"""

import argparse
import hashlib
import os
import random
import statistics
import time
import uuid
from datetime import timedelta
from decimal import Decimal

from _setup import machine, throwaway_database

TEAMS, PEOPLE, NODES, CORES = 10, 5, 50, 64
OUTCOMES = [("succeeded", 80), ("failed", 10), ("timed_out", 4), ("out_of_memory", 3), ("cancelled", 2),
            ("node_lost", 1)]  # fmt: skip
DAYS = 90
# A failed job's excerpt as a real one reads: ten lines of a traceback.
EXCERPT = "\n".join(f'  File "/data/train.py", line {40 + i}, in step_{i}: loss = model(batch)' for i in range(9))
EXCERPT += "\nERROR: upstream table missing"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--warm-up", type=int, default=5, help="rounds of every page before the measured ones")
    args = parser.parse_args()
    throwaway_database("e31_bench_pages")

    from django.test.utils import setup_test_environment

    setup_test_environment()  # the test Client's host, 'testserver', is allowed
    started = time.perf_counter()
    world = populate(args.jobs)
    print(machine())
    print(f"data: {args.jobs:,} released jobs with records, {world['running']} running, {world['waiting']} waiting, "
          f"{TEAMS} teams, {NODES} nodes; written in {time.perf_counter() - started:.1f} s")  # fmt: skip

    from django.db import connection
    from django.test import Client

    from jobs.web.views import PAGE_SIZE

    member, operator = Client(), Client()
    member.force_login(world["member"])
    operator.force_login(world["operator"])
    month_ago = (world["now"] - timedelta(days=30)).date().isoformat()
    deep_page = max(1, args.jobs // TEAMS * 3 // 4 // PAGE_SIZE)  # three quarters down the member's team's jobs
    pages = [
        ("review", member, "/"),
        ("jobs", member, "/jobs/"),
        ("jobs_deep", member, f"/jobs/?page={deep_page}"),
        ("jobs_filtered", member, f"/jobs/?outcome=failed&since={month_ago}&q=train"),
        ("job", member, f"/jobs/{world['job_id']}/"),
        ("operator", operator, "/operator/"),
        ("usage", member, "/usage/"),
    ]

    def anchor() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT name FROM jobs_job WHERE id = %s", [world["job_id"]])
            cursor.fetchone()

    # Round after round, each page once and the anchor five times: the machine's busy moments (other
    # processes share its two cores) fall on every page alike, not on whichever was measured then.
    times: dict[str, list[float]] = {name: [] for name, _, _ in pages}
    anchor_times: list[float] = []
    for round_number in range(args.requests + args.warm_up):
        for name, client, url in pages:
            start = time.perf_counter()
            check(client.get(url), url)
            if round_number >= args.warm_up:  # the first rounds warm up
                times[name].append((time.perf_counter() - start) * 1000)
        anchor_times += measure(anchor, 5, warm=0) if round_number >= args.warm_up else []
    anchor_median = statistics.median(anchor_times)
    print(f"{'page':<14} {'url':<48} {'median ms':>10} {'p95 ms':>8} {'median/anchor':>14}")
    results: list[tuple[str, float, float]] = []
    for name, _, url in pages:
        p95, median = percentile(times[name], 95), statistics.median(times[name])
        print(f"{name:<14} {url:<48} {median:>10.1f} {p95:>8.1f} {median / anchor_median:>13.0f}x")
        results.append((name, p95, median))
    if profile := os.environ.get("BENCH_PROFILE"):  # a page's name: where its time goes
        import cProfile
        import pstats

        client, url = next((c, u) for n, c, u in pages if n == profile)
        with cProfile.Profile() as profiler:
            for _ in range(5):
                client.get(url)
        stats = pstats.Stats(profiler).sort_stats(os.environ.get("BENCH_SORT", "cumulative"))
        stats.print_stats(os.environ.get("BENCH_FILTER", ""), 40)
        timed: list[tuple[float, str]] = []

        def timer(execute, sql, params, many, context):
            start = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                timed.append(((time.perf_counter() - start) * 1000, sql))

        with connection.execute_wrapper(timer):
            client.get(url)
        for ms, sql in sorted(timed, reverse=True)[:8]:
            print(f"{ms:8.1f} ms  {sql[:400]}")
    print(f"anchor_select_ms: {anchor_median:.3f} ms (median; p95 {percentile(anchor_times, 95):.3f} ms)")
    for name, p95, median in results:
        print(f"{name}_p95_ms: {p95:.1f} ms (median {median:.1f} ms)")
        print(f"{name}_vs_anchor_ratio: {median / anchor_median:.0f} (medians)")


def check(response, url: str) -> None:
    if response.status_code != 200:
        raise SystemExit(f"{url} answered {response.status_code} during the measurement")


def measure(request, count: int, warm: int = 5) -> list[float]:
    for _ in range(warm):
        request()
    times = []
    for _ in range(count):
        start = time.perf_counter()
        request()
        times.append((time.perf_counter() - start) * 1000)
    return times


def percentile(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def populate(count: int) -> dict:
    """The teams, people, nodes and jobs (released ones with a hold and a record each; running ones with
    a hold and its cores; waiting ones with a queue position), in bulk inserts."""
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.utils import timezone

    from accounting.models import Ledger, Record
    from accounting.rates import settings_rate
    from isolation.models import ProbeResult, ProbeRound
    from isolation.probes import PROBES
    from jobs.models import Job, RuntimeImage
    from pool.models import HeldCore, Hold, Node
    from teams.models import Membership, Team

    rng = random.Random(31)
    now = timezone.now()
    teams = Team.objects.bulk_create([Team(slug=f"team-{t}", name=f"Team {t}") for t in range(TEAMS)])
    people = User.objects.bulk_create([User(username=f"u{t}-{p}") for t in range(TEAMS) for p in range(PEOPLE)])
    Membership.objects.bulk_create([Membership(team=teams[i // PEOPLE], user=u) for i, u in enumerate(people)])
    operator = User.objects.create(username="operator", is_staff=True)
    images = RuntimeImage.objects.bulk_create(
        [RuntimeImage(name=n, reference=f"e31/{n}:1", description=n) for n in ("python", "busybox", "r")]
    )
    nodes = Node.objects.bulk_create([
        Node(name=f"node-{i:02d}", cpu_ids=list(range(CORES)), memory_mb=256 * 1024, gpu_ids=[], registered_at=now,
             last_heartbeat=now - timedelta(seconds=rng.randint(0, 20)))
        for i in range(NODES)
    ])  # fmt: skip
    outcomes = [o for o, weight in OUTCOMES for _ in range(weight)]
    jobs, holds, records = [], [], []
    prev = "0" * 64
    for n in range(count):
        t = n % TEAMS
        submitted = now - timedelta(seconds=rng.uniform(600, DAYS * 86400))
        held = submitted + timedelta(seconds=rng.uniform(1, 900))
        ran = timedelta(seconds=rng.uniform(5, 3 * 3600))
        released = held + ran + timedelta(seconds=2)
        outcome = rng.choice(outcomes)
        cpus = rng.choice([1, 1, 2, 4, 8])
        memory = rng.choice([256, 1024, 4096])
        job = Job(
            id=uuid.uuid4(), team=teams[t], submitted_by=people[t * PEOPLE + rng.randrange(PEOPLE)],
            name=f"{rng.choice(['nightly', 'hourly', 'adhoc'])} {rng.choice(['train', 'convert', 'simulate'])} {n % 12}",  # noqa: E501
            image=images[n % 3], command=["python3", "/data/train.py", "--epochs", str(n % 50)], env={},
            cpus=cpus, memory_mb=memory, time_limit_s=4 * 3600, output_patterns=[], stage="release",
            outcome=outcome, exit_code=0 if outcome == "succeeded" else 1, reason="" if outcome == "succeeded"
            else f"{outcome} in the bench", failure_excerpt="" if outcome == "succeeded" else EXCERPT,
            submitted_at=submitted, held_at=held, started_at=held,
            finished_at=released - timedelta(seconds=1), released_at=released,
        )  # fmt: skip
        node = nodes[n % NODES]
        hold = Hold(id=uuid.uuid4(), job=job, node=node, cpu_set=list(range(cpus)), memory_mb=memory, held_at=held,
                    released_at=released, runtime="runc")  # fmt: skip
        seconds = Decimal(round((released - held).total_seconds(), 3))
        digest = hashlib.sha256(f"{n}{prev}".encode()).hexdigest()
        records.append(Record(
            id=uuid.uuid4(), hold=hold, job=job, team=teams[t], node=node.name, cpu_set=hold.cpu_set, cpus=cpus,
            memory_mb=memory, gpus=0, gpu_ids=[], held_at=held, released_at=released, held_seconds=seconds,
            cpu_seconds=seconds * Decimal("0.6") * cpus, memory_peak_mb=memory // 2,
            cost=settings_rate().cost(cpus=cpus, memory_mb=memory, gpus=0, held_seconds=seconds), outcome=outcome,
            sequence=n + 1, prev_hash=prev, hash=digest,
        ))  # fmt: skip
        prev = digest
        jobs.append(job)
        holds.append(hold)
    # Running: 300 jobs holding 2 cores each on the first nodes; waiting: 500, the first 4 reserved.
    running_jobs, running_holds, cores = [], [], []
    for r in range(300):
        t, node = r % TEAMS, nodes[r % NODES]
        held = now - timedelta(seconds=rng.uniform(10, 7200))
        job = Job(id=uuid.uuid4(), team=teams[t], submitted_by=people[t * PEOPLE], name=f"running train {r}",
                  image=images[0], command=["python3", "/data/train.py"], cpus=2, memory_mb=1024, time_limit_s=14400,
                  stage="run", submitted_at=held - timedelta(seconds=30), held_at=held, started_at=held)  # fmt: skip
        pair = [2 * (r // NODES), 2 * (r // NODES) + 1]
        hold = Hold(id=uuid.uuid4(), job=job, node=node, cpu_set=pair, memory_mb=1024, held_at=held, runtime="runc")
        running_jobs.append(job)
        running_holds.append(hold)
        cores += [HeldCore(node=node, core=c, hold=hold) for c in pair]
    waiting = [
        Job(id=uuid.uuid4(), team=teams[w % TEAMS], submitted_by=people[(w % TEAMS) * PEOPLE], name=f"waiting {w}",
            image=images[1], command=["true"], cpus=64, memory_mb=1024, time_limit_s=600, stage="submit",
            submitted_at=now - timedelta(seconds=w * 7), queue_position=w + 1,
            wait_reason="no node has 64 cores free", expected_start=now + timedelta(minutes=30) if w < 4 else None)
        for w in range(500)
    ]  # fmt: skip
    Job.objects.bulk_create(jobs + running_jobs + waiting, batch_size=5000)
    Hold.objects.bulk_create(holds + running_holds, batch_size=5000)
    HeldCore.objects.bulk_create(cores, batch_size=5000)
    Record.objects.bulk_create(records, batch_size=5000)
    Ledger.objects.update_or_create(pk=1, defaults={"last_sequence": count, "last_hash": prev})
    # The isolation probes' last round on every node under runc (two nodes with a failed probe): the panel's top.
    rounds = ProbeRound.objects.bulk_create([
        ProbeRound(node=node, runtime="runc", trigger="daily", started_at=now - timedelta(hours=3),
                   judged_at=now - timedelta(hours=2))
        for node in nodes
    ])  # fmt: skip
    ProbeResult.objects.bulk_create([
        ProbeResult(round=r, probe=probe.name, at=r.judged_at, evidence="bench",
                    verdict="failed" if i < 2 and probe.name == "network" else "passed")
        for i, r in enumerate(rounds) for probe in PROBES
    ])  # fmt: skip
    from django.db import connection

    with connection.cursor() as cursor:
        # As autovacuum would have: the visibility map lets index-only scans skip the rows.
        cursor.execute("VACUUM ANALYZE")
    assert settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    member = people[0]
    job_id = next(j.pk for j in jobs if j.team_id == teams[0].pk and j.outcome == "failed")
    return {"now": now, "member": member, "operator": operator, "job_id": job_id, "running": len(running_jobs),
            "waiting": len(waiting)}  # fmt: skip


if __name__ == "__main__":
    main()
