"""Scale (issue 24): 1,000 registered nodes (rows, no containers) and 50,000 waiting jobs on one PostgreSQL.

The pool: 600 nodes of 32 cores and 128 GB, 300 of 64 cores and 256 GB, 100 of 96 cores, 768 GB and 8 GPUs
(48,000 cores); 50,000 jobs of 100 teams waiting (1 to 16 cores, 2 GB a core, 2% with a GPU), more than the
pool holds, so most still wait when it is full. Measured, in this order:

1. Heartbeats with nothing else running, from `--clients` processes forked from this one, each beating its
   share of the 1,000 nodes round robin as fast as it can: the real beat of a node's heartbeat thread
   (worker.node.beat: pool.nodes.heartbeat with the scratch space, the node's row, the watchdog's look at
   its holds, inside database.unit_of_work), with the default `DATABASE_CONN_MAX_AGE=0` (a connection per
   beat) and with a kept connection; beside it the anchor, a plain `UPDATE pool_node SET last_heartbeat`
   by primary key, on a new connection each time and on a kept one. The server's CPU seconds per beat (all
   of PostgreSQL's processes, exited backends included, less their use in a quiet window just before).
2. Scheduler passes (jobs.lifecycle.actions.schedule_pass, the runs it queues counted, not sent) until one holds
   nothing, while every node beats once per E31_HEARTBEAT_S as its worker would (paced, spread over the
   interval): holds/s, each pass's time, and the beats' latency percentiles at that required rate.
3. As fast as the beats go while passes run back to back on the full pool (each pass reading the whole
   queue and holding nothing): the sustained maximum rate with the pass running.
4. The reaper (worker.reaper.reap_lost_nodes: mark_lost_nodes, then release_lost of every job held on an
   offline node) with `--lost` nodes silent, each holding jobs; then a pass with nothing lost.
5. Memory: a gunicorn with the project's config (e31site/gunicorn_conf.py, 2 processes) serving the pool's
   pages and the queue at this size; a real `celery beat` for a while. RSS and PSS (preload shares pages).

A process emulates its nodes one after another, so a beat waiting for a pass delays that process's next ones:
their lateness ("started late") is the emulator's; each beat's latency is what a node sees. Likewise the rate
in 3 is bounded by `--clients` beats in flight, where 1,000 real nodes would have 1,000 waiting at once.

Prints the headline figures last; `--profile` prints where a full pass's and the reaper's time goes.
Run: .venv/bin/python bench/scale.py [--nodes N] [--jobs N] [--clients N] [--profile]
"""

import argparse
import atexit
import multiprocessing
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

from _setup import BROKER_DB, ROOT, machine, throwaway_database

SHAPES = [(600, 32, 128, 0), (300, 64, 256, 0), (100, 96, 768, 8)]  # of 1,000: count, cores, GB, GPUs
TEAMS = 100
T = TypeVar("T")
SCRATCH = tempfile.mkdtemp(prefix="e31-bench-scale-")
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--clients", type=int, default=16, help="processes emulating the nodes' heartbeats")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each flat-out heartbeat run")
    parser.add_argument("--profile", action="store_true", help="print where a full pass's time goes")
    parser.add_argument("--lost", type=int, default=20, help="nodes the reaper finds silent")
    parser.add_argument("--beat-seconds", type=float, default=25.0, help="how long celery beat runs before its memory")
    parser.add_argument("--interval", type=float, help="seconds between two beats of a node (E31_HEARTBEAT_S)")
    args = parser.parse_args()
    # Before Django reads its settings: beat's tasks and the cache go to the bench's Redis database, and the
    # watchdog of the emulated nodes looks at an empty scratch folder.
    os.environ["CELERY_BROKER_URL"] = f"redis://127.0.0.1:6379/{BROKER_DB}"
    os.environ["E31_SCRATCH_DIR"] = SCRATCH
    # A real node's runs are watched by its own processes; here none is, and none should be sent again.
    os.environ["E31_RESEND_AFTER_S"] = "86400"
    url = throwaway_database("e31_bench_scale")

    from django.conf import settings

    from jobs.scheduling import dispatch

    # The runs each pass queues (and any a watchdog sends again) are counted, not sent: no worker takes them.
    sent: list[str] = []
    dispatch.send = lambda task, *, args=None, queue=None, eta=None: sent.append(task)
    interval = args.interval or settings.E31_HEARTBEAT_S
    required = args.nodes / interval

    started = time.perf_counter()
    world = populate(args.nodes, args.jobs)
    print(machine())
    print(postgres_settings())
    print(f"data: {args.nodes} nodes ({world['cores']:,} cores), {args.jobs:,} waiting jobs of {TEAMS} teams; "
          f"written in {time.perf_counter() - started:.1f} s")  # fmt: skip
    print(f"a beat every {interval} s, E31_NODE_LOST_S {settings.E31_NODE_LOST_S} s, "
          f"E31_SCHEDULE_EVERY_S {settings.E31_SCHEDULE_EVERY_S} s: {required:.0f} beats/s required")  # fmt: skip
    nodes = world["nodes"]

    # 1. Heartbeats alone, flat out, and the anchors.
    flat = {}
    for mode in ("anchor_new", "anchor_kept", "beat_new", "beat_kept"):
        # The server's CPU in a quiet window of the same length just before: other databases' share, taken off.
        quiet = postgres_cpu()
        time.sleep(args.seconds)
        others = (postgres_cpu() - quiet) / args.seconds
        flat[mode] = beat_run(mode, nodes, args.clients, url, seconds=args.seconds)
        flat[mode]["postgres_cpu_s"] -= others * flat[mode]["seconds"]
        print(f"alone, {mode:<12} {describe(flat[mode])} (net of {others:.2f} CPU s/s before)")

    # 2. Scheduler passes until the pool is full, with the required heartbeats.
    passes, paced = passes_with_heartbeats(nodes, args.clients, url, interval)
    held = sum(n for n, _ in passes)
    holding = [(n, s) for n, s in passes if n]
    pass_s = sum(s for _, s in holding)
    print(f"passes: {len(passes)}, holds per pass and seconds: " + ", ".join(f"{n}/{s:.2f}" for n, s in passes))
    print(f"paced beats during the passes: {describe(paced)}")

    # 3. Flat out while full passes run back to back.
    with_pass, idle_passes = beats_with_passes(nodes, args.clients, url, seconds=args.seconds * 2)
    idle_s = statistics.median(idle_passes) if idle_passes else float("nan")
    print(f"with passes, beat_new {describe(with_pass)}; {len(idle_passes)} full passes, median {idle_s:.2f} s")
    queue_read_s = statistics.median(queue_read() for _ in range(3))

    # 4. The reaper.
    reap_s, reaped_jobs, quiet_reap_s, reap_profile, reap_anchor_s = reaper(args.lost, profile=args.profile)
    if reap_profile:
        print(reap_profile)
    print(f"reaper: {args.lost} nodes lost holding {reaped_jobs} jobs in {reap_s:.2f} s; "
          f"nothing lost {quiet_reap_s * 1000:.0f} ms")  # fmt: skip
    if args.profile:
        print(profiled(timed_pass)[1])

    # 5. Memory.
    web = web_memory(world)
    print("web: " + web["text"])
    beat = beat_memory(args.beat_seconds)
    print(f"celery beat: RSS {beat['rss']:.0f} MB, PSS {beat['pss']:.0f} MB after {beat['seconds']:.0f} s")
    print(f"runs queued (counted, not sent): {sent.count(dispatch.RUN_TASK)}")

    alone, kept, anchor, anchor_kept = flat["beat_new"], flat["beat_kept"], flat["anchor_new"], flat["anchor_kept"]
    pg_ms = alone["postgres_cpu_s"] / alone["count"] * 1000
    serves = alone["rate"] * interval / 2
    kept_ms = kept["postgres_cpu_s"] / kept["count"] * 1000
    anchor_pg_ms = anchor["postgres_cpu_s"] / anchor["count"] * 1000
    print(f"nodes_by_heartbeat_rate: {serves:,.0f} nodes (half the rate sustained here with no pass running)")
    # By the server's CPU per beat: at half of one core, one beat per node per interval.
    print(f"nodes_per_postgres_core: {interval / (pg_ms / 1000) / 2:,.0f} nodes "
          f"({interval / (kept_ms / 1000) / 2:,.0f} with kept connections; half a core's CPU)")  # fmt: skip
    print(f"anchor_update_new_connection_per_s: {anchor['rate']:.0f} /s")
    print(f"heartbeats_alone_per_s: {alone['rate']:.0f} /s")
    print(f"heartbeats_alone_vs_anchor_ratio: {alone['rate'] / anchor['rate']:.2f}")
    print(f"anchor_update_kept_connection_per_s: {anchor_kept['rate']:.0f} /s")
    print(f"heartbeats_kept_connection_per_s: {kept['rate']:.0f} /s")
    print(f"heartbeats_kept_vs_anchor_ratio: {kept['rate'] / anchor_kept['rate']:.2f}")
    print(f"heartbeats_with_pass_per_s: {with_pass['rate']:.0f} /s (at most {args.clients} in flight, each beat a "
          "new connection)")  # fmt: skip
    print(f"heartbeats_with_pass_vs_anchor_ratio: {with_pass['rate'] / anchor['rate']:.2f}")
    print(f"anchor_postgres_cpu_per_update_ms: {anchor_pg_ms:.2f} ms (new connection)")
    print(f"server_postgres_cpu_per_heartbeat: {pg_ms:.2f} ms (kept connection {kept_ms:.2f} ms)")
    print(f"postgres_cpu_vs_anchor_ratio: {pg_ms / anchor_pg_ms:.2f}")
    print(f"anchor_update_p50_ms: {anchor['p50']:.1f} ms (flat out, new connection)")
    print(f"heartbeat_p50_ms_at_required_rate: {paced['p50']:.1f} ms")
    print(f"heartbeat_p99_ms_at_required_rate: {paced['p99']:.1f} ms (max {paced['max']:.0f} ms)")
    print(f"heartbeat_p50_vs_anchor_ratio: {paced['p50'] / anchor['p50']:.2f}")
    print(f"anchor_queue_read_s: {queue_read_s:.3f} s (the waiting jobs read by one plain query)")
    print(f"full_pass_s: {idle_s:.2f} s ({args.jobs - held:,} waiting, {args.nodes} nodes)")
    print(f"full_pass_vs_queue_read_ratio: {idle_s / queue_read_s:.1f}")
    print(f"anchor_reaper_updates_s: {reap_anchor_s:.3f} s (its holds released and jobs moved by two plain UPDATEs)")
    print(f"reaper_s: {reap_s:.2f} s ({args.lost} nodes lost, {reaped_jobs} jobs)")
    print(f"reaper_vs_anchor_ratio: {reap_s / reap_anchor_s:.1f}")
    print(f"anchor_bare_gunicorn_rss_mb: {web['anchor_rss']:.0f} MB (2 processes and the master, wsgiref's demo app)")
    print(f"web_rss_mb: {web['rss']:.0f} MB (PSS {web['pss']:.0f} MB; 2 processes and the master)")
    print(f"web_rss_vs_anchor_ratio: {web['rss'] / web['anchor_rss']:.2f}")
    print(f"beat_rss_mb: {beat['rss']:.0f} MB (no anchor)")
    print(f"holds_per_s: {held / pass_s:.0f} holds/s ({held:,} holds; no anchor)")


def queue_read() -> float:
    """Seconds to read the waiting queue with one plain query, as a pass must at least: the full pass's anchor."""
    from django.db import connection

    start = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, team_id, cpus, memory_mb, gpus, time_limit_s, submitted_at FROM jobs_job "
            "WHERE stage = 'submit' ORDER BY submitted_at"
        )
        cursor.fetchall()
    return time.perf_counter() - start


def populate(count: int, jobs: int) -> dict:
    """The nodes (registered, active, just beaten), the teams with a member each, the waiting jobs."""
    from django.contrib.auth.models import User
    from django.db import connection
    from django.utils import timezone

    from jobs.models import Job, RuntimeImage
    from pool.models import Node
    from teams.models import Membership, Team

    rng = random.Random(24)
    now = timezone.now()
    shapes = [shape for number, *shape in SHAPES for _ in range(number * count // 1000)]
    shapes += [shapes[-1]] * (count - len(shapes))
    nodes = Node.objects.bulk_create([
        Node(name=f"node-{i:04d}", cpu_ids=list(range(cores)), memory_mb=gb * 1024 - 1024,
             gpu_ids=[f"GPU-{i:04d}-{g}" for g in range(gpus)], registered_at=now, last_heartbeat=now,
             scratch_free_mb=900_000, scratch_min_free_mb=10_240)
        for i, (cores, gb, gpus) in enumerate(shapes)
    ])  # fmt: skip
    teams = Team.objects.bulk_create([Team(slug=f"team-{t}", name=f"Team {t}") for t in range(TEAMS)])
    people = User.objects.bulk_create([User(username=f"u{t}") for t in range(TEAMS)])
    Membership.objects.bulk_create([Membership(team=team, user=people[t]) for t, team in enumerate(teams)])
    User.objects.create(username="operator", is_staff=True)
    image = RuntimeImage.objects.create(name="python", reference="e31/python:1")
    rows = []
    for n in range(jobs):
        t = min(int(rng.paretovariate(1.2)) - 1, TEAMS - 1)  # a few teams submit most of the jobs
        cpus = rng.choice([1, 1, 1, 2, 2, 4, 4, 8, 16])
        rows.append(Job(team=teams[t], submitted_by=people[t], name=f"train {n % 40}", image=image,
                        command=["python3", "/data/train.py"], cpus=cpus, memory_mb=cpus * 2048,
                        gpus=1 if rng.random() < 0.02 else 0, time_limit_s=rng.choice([600, 3600, 4 * 3600]),
                        submitted_at=now - timedelta(seconds=rng.uniform(0, 7200))))  # fmt: skip
    Job.objects.bulk_create(rows, batch_size=5000)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")  # as autovacuum would have
    return {"nodes": [(n.pk, n.name) for n in nodes], "cores": sum(len(n.cpu_ids) for n in nodes),
            "member": people[0], "operator": User.objects.get(username="operator")}  # fmt: skip


def postgres_settings() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT split_part(version(), ' ', 2)")
        version = cursor.fetchone()[0]
        shown = []
        for name in ("shared_buffers", "fsync", "synchronous_commit", "max_connections"):
            cursor.execute(f"SHOW {name}")
            shown.append(f"{name} {cursor.fetchone()[0]}")
    return f"PostgreSQL {version}, " + ", ".join(shown)


# The heartbeat processes.


def beater(mode: str, mine: list, url: str, stop, results, paced_every: float, offsets: list[float], t0: float):
    """One process of the emulated nodes: beat each of `mine` in turn, flat out, or each once per
    `paced_every` at its offset in the interval; put (count, latencies in ms, lateness in ms) on `results`."""
    import psycopg
    from django.db import connection

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    connection.close()  # the parent's, inherited by the fork: never used here
    if mode.endswith("_kept"):
        connection.settings_dict["CONN_MAX_AGE"] = 3600
    kept = psycopg.connect(url, autocommit=True) if mode == "anchor_kept" else None
    beat_once(mode, *mine[0], url, kept)  # warm: the first connection, the first compiled queries
    latencies, late = [], []
    count, round_number = 0, 0
    started = time.perf_counter()
    while not stop.is_set():
        for (pk, name), offset in zip(mine, offsets, strict=True):
            if stop.is_set():
                break
            if paced_every:
                planned = t0 + round_number * paced_every + offset
                wait = planned - time.time()
                if wait > 0 and stop.wait(wait):
                    break
                late.append(max(0.0, time.time() - planned) * 1000)
            start = time.perf_counter()
            beat_once(mode, pk, name, url, kept)
            latencies.append((time.perf_counter() - start) * 1000)
            count += 1
        round_number += 1
    results.put((count, time.perf_counter() - started, latencies, late))


def beat_once(mode: str, pk: int, name: str, url: str, kept) -> None:
    if mode.startswith("beat"):
        from django.conf import settings

        from worker.node import beat

        settings.E31_NODE_NAME = name  # this process emulates one node at a time
        beat()
    elif mode == "anchor_kept":
        kept.execute("UPDATE pool_node SET last_heartbeat = now() WHERE id = %s", [pk])
    else:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE pool_node SET last_heartbeat = now() WHERE id = %s", [pk])


class Beaters:
    """`clients` forked processes beating the nodes until stopped; the CPU by process over their run."""

    def __init__(self, mode: str, nodes: list, clients: int, url: str, *, paced_every: float = 0.0):
        from django.db import connections

        import worker.node  # noqa: F401  (imported once here, not by each process on its first beat)

        connections.close_all()  # no connection crosses the fork
        ctx = multiprocessing.get_context("fork")
        self.stop, self.results = ctx.Event(), ctx.Queue()
        t0 = time.time() + 2.0
        self.processes = []
        for k in range(clients):
            indexes = list(range(k, len(nodes), clients))
            offsets = [i * paced_every / len(nodes) for i in indexes]
            mine = [nodes[i] for i in indexes]
            self.processes.append(ctx.Process(
                target=beater, args=(mode, mine, url, self.stop, self.results, paced_every, offsets, t0), daemon=True
            ))  # fmt: skip
        self.cpu_before = postgres_cpu()
        self.started = time.perf_counter()
        for process in self.processes:
            process.start()

    def finish(self) -> dict:
        self.stop.set()
        got = [self.results.get(timeout=120) for _ in self.processes]
        seconds = time.perf_counter() - self.started
        for process in self.processes:
            process.join(30)
        postgres = postgres_cpu() - self.cpu_before
        count = sum(c for c, _, _, _ in got)
        rate = sum(c / s for c, s, _, _ in got if s > 0)  # each process's beats over its own measured time
        latencies = sorted(x for _, _, lat, _ in got for x in lat)
        late = sorted(x for _, _, _, lt in got for x in lt)
        return {
            "count": count, "seconds": seconds, "rate": rate, "postgres_cpu_s": postgres,
            "p50": percentile(latencies, 50), "p95": percentile(latencies, 95), "p99": percentile(latencies, 99),
            "max": latencies[-1] if latencies else float("nan"),
            "late_p99": percentile(late, 99) if late else None, "late_max": late[-1] if late else None,
        }  # fmt: skip


def postgres_cpu() -> float:
    """CPU seconds of the PostgreSQL server so far: its processes' own, and those of the backends that
    exited (a connection per beat), which the kernel adds to the postmaster's children's time. Every
    database of the server counts: on a shared machine, other sessions' tests too."""
    tick = os.sysconf("SC_CLK_TCK")
    used = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = entry.joinpath("stat").read_text()
        except OSError:
            continue
        if stat[stat.index("(") + 1 : stat.rindex(")")] == "postgres":
            fields = stat[stat.rindex(")") + 2 :].split()
            used += sum(int(f) for f in fields[11:15]) / tick  # utime, stime, cutime, cstime
    return used


def beat_run(mode: str, nodes: list, clients: int, url: str, *, seconds: float) -> dict:
    beaters = Beaters(mode, nodes, clients, url)
    time.sleep(seconds)
    return beaters.finish()


def describe(run: dict) -> str:
    text = (f"{run['count']} beats in {run['seconds']:.1f} s = {run['rate']:.0f}/s; latency p50 {run['p50']:.1f}, "
            f"p95 {run['p95']:.1f}, p99 {run['p99']:.1f}, max {run['max']:.0f} ms; "
            f"server's postgres CPU {run['postgres_cpu_s']:.1f} s")  # fmt: skip
    if run["late_p99"] is not None:
        text += f"; started late p99 {run['late_p99']:.0f} ms, max {run['late_max']:.0f} ms"
    return text


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


# The scheduler and the reaper.


def timed_pass() -> tuple[int, float]:
    from django.db import transaction
    from django.utils import timezone

    from jobs.lifecycle.actions import schedule_pass

    start = time.perf_counter()
    with transaction.atomic():  # as the task runs it (jobs.tasks.schedule)
        held = len(schedule_pass(now=timezone.now()))
    return held, time.perf_counter() - start


def passes_with_heartbeats(nodes: list, clients: int, url: str, interval: float) -> tuple[list, dict]:
    """Passes until one holds nothing, while every node beats once per `interval`."""
    beaters = Beaters("beat_new", nodes, clients, url, paced_every=interval)
    time.sleep(interval + 1)  # every node has beaten once before the first pass
    passes = []
    while True:
        held, seconds = timed_pass()
        passes.append((held, seconds))
        if not held:
            break
    return passes, beaters.finish()


def beats_with_passes(nodes: list, clients: int, url: str, *, seconds: float) -> tuple[dict, list[float]]:
    beaters = Beaters("beat_new", nodes, clients, url)
    deadline = time.perf_counter() + seconds
    took = []
    while time.perf_counter() < deadline:
        took.append(timed_pass()[1])
    return beaters.finish(), took


def profiled(function: Callable[[], T]) -> tuple[T, str]:
    """What `function()` returns, and its cProfile: the project's functions by cumulative time, then all by own time."""
    import cProfile
    import io
    import pstats

    profile = cProfile.Profile()
    profile.enable()
    returned = function()
    profile.disable()
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text).sort_stats("cumulative")
    stats.print_stats(r"/(jobs|pool|teams|accounting|worker)/", 30)
    stats.sort_stats("tottime").print_stats(15)
    return returned, text.getvalue()


def reaper(lost: int, *, profile: bool) -> tuple[float, int, float, str, float]:
    """Silence `lost` nodes that hold jobs (their last beat long ago), then time the reaper's pass; and its
    anchor: the least it must write (its holds released, its jobs moved), by two plain UPDATEs rolled back."""
    from django.conf import settings
    from django.db import transaction
    from django.utils import timezone

    from jobs.models import Job, Stage
    from pool.models import Hold, Node
    from worker.reaper import reap_lost_nodes

    now = timezone.now()
    Node.objects.update(last_heartbeat=now)  # every node has just beaten: the emulated ones stopped a while ago
    holding = Node.objects.filter(holds__released_at__isnull=True).distinct().order_by("name")[:lost]
    chosen = list(holding.values_list("pk", flat=True))
    Node.objects.filter(pk__in=chosen).update(last_heartbeat=now - timedelta(seconds=2 * settings.E31_NODE_LOST_S))
    jobs = Hold.objects.filter(node__in=chosen, released_at__isnull=True).count()
    with transaction.atomic():
        start = time.perf_counter()
        held = Hold.objects.filter(node__in=chosen, released_at__isnull=True)
        Job.objects.filter(holds__in=held).update(stage=Stage.RELEASE, released_at=now)
        held.update(released_at=now)
        anchor_s = time.perf_counter() - start
        transaction.set_rollback(True)
    start = time.perf_counter()
    if profile:
        names, text = profiled(lambda: reap_lost_nodes(now=timezone.now()))
    else:
        names, text = reap_lost_nodes(now=timezone.now()), ""
    reap_s = time.perf_counter() - start
    assert len(names) == len(chosen), f"{len(names)} nodes lost of {len(chosen)}"
    left = Hold.objects.filter(node__in=chosen, released_at__isnull=True).count()
    assert left == 0, f"{left} holds left on lost nodes"
    start = time.perf_counter()
    reap_lost_nodes(now=timezone.now())
    return reap_s, jobs, time.perf_counter() - start, text, anchor_s


# Memory.


def memory_of(pids: list[int]) -> tuple[float, float]:
    """RSS and PSS (MB) summed over `pids`."""
    rss = pss = 0.0
    for pid in pids:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss += int(line.split()[1]) / 1024
            elif line.startswith("Pss:"):
                pss += int(line.split()[1]) / 1024
    return rss, pss


def children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(p) for p in text]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def web_memory(world: dict) -> dict:
    """A gunicorn with the project's config and 2 processes, serving the pool's pages at this size."""
    from django.test import Client

    operator = Client()
    operator.force_login(world["operator"])
    member = Client()
    member.force_login(world["member"])
    port = free_port()
    log = ROOT / "var" / "log" / "bench-scale-web.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "gunicorn"), "e31site.wsgi", "-c", "e31site/gunicorn_conf.py",
             "-b", f"127.0.0.1:{port}", "-w", "2"],
            cwd=ROOT, env=os.environ.copy(), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        pages = [("operator", operator, "/operator/"), ("nodes", operator, "/operator/nodes/"), ("review", member, "/"),
                 ("jobs", member, "/jobs/"), ("api_jobs", member, "/api/v1/jobs/")]  # fmt: skip
        served: dict[str, list[float]] = {}
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=5).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"gunicorn did not start; see {log}") from None
                time.sleep(0.3)
        for _ in range(6):  # each page a few times, so both processes serve each
            for name, client, path in pages:
                cookie = f"sessionid={client.cookies['sessionid'].value}"
                request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Cookie": cookie})
                start = time.perf_counter()
                try:
                    with urllib.request.urlopen(request, timeout=120) as answer:
                        answer.read()
                except OSError as exc:
                    served.setdefault(f"{name} ({exc})", [])
                    continue
                served.setdefault(name, []).append((time.perf_counter() - start) * 1000)
        pids = [server.pid, *children(server.pid)]
        rss, pss = memory_of(pids)
        workers = [memory_of([pid])[0] for pid in pids[1:]]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    anchor_rss = bare_gunicorn_memory()
    pages_text = ", ".join(
        f"{name} median {statistics.median(ms):.0f} ms" if ms else name for name, ms in served.items()
    )
    text = (f"RSS {rss:.0f} MB, PSS {pss:.0f} MB (master and {len(workers)} processes, RSS each "
            f"{', '.join(f'{w:.0f}' for w in workers)} MB) after serving {pages_text}")  # fmt: skip
    return {"rss": rss, "pss": pss, "text": text, "anchor_rss": anchor_rss}


def bare_gunicorn_memory() -> float:
    """The web's anchor: RSS (MB) of a plain gunicorn with as many processes serving wsgiref's demo app."""
    port = free_port()
    server = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "gunicorn"), "wsgiref.simple_server:demo_app", "-b", f"127.0.0.1:{port}",
         "-w", "2"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        for _ in range(12):  # a few requests, so both processes serve some
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read()
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit("the bare gunicorn did not start") from None
                    time.sleep(0.3)
        return memory_of([server.pid, *children(server.pid)])[0]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


def beat_memory(seconds: float = 25.0) -> dict:
    """A real `celery beat` on the bench's broker database for `seconds`, then its memory."""
    from tests.workers import purge_broker

    broker = os.environ["CELERY_BROKER_URL"]
    schedule = Path(SCRATCH) / "beat-schedule"
    log = ROOT / "var" / "log" / "bench-scale-beat.log"
    with open(log, "wb") as out:
        beat = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "celery"), "-A", "e31site", "beat", "-l", "warning", "-s", str(schedule)],
            cwd=ROOT, env=os.environ.copy(), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        time.sleep(seconds)
        if beat.poll() is not None:
            raise SystemExit(f"celery beat exited; see {log}")
        rss, pss = memory_of([beat.pid, *children(beat.pid)])
    finally:
        beat.send_signal(signal.SIGTERM)
        beat.wait(30)
        purge_broker(broker)  # the tasks it sent: no worker of this database consumes them
    return {"rss": rss, "pss": pss, "seconds": seconds}


if __name__ == "__main__":
    sys.exit(main())
