"""Scheduler quality: a synthetic workload replayed through the real placement, against EASY backfilling.

The workload is Lublin & Feitelson's model of rigid batch jobs ("The workload on parallel supercomputers:
modeling the characteristics of rigid jobs", JPDC 63(11), 2003): arrivals with a daily cycle, sizes
(serial or parallel, a two-stage uniform log2 size, most rounded to a power of two) and runtimes
(a hyper-gamma on the log of the runtime whose mix depends on the size). The users' time limits follow the
f-model of Mu'alem & Feitelson ("Utilization, predictability, workloads, and user runtime estimates in
scheduling the IBM SP2 with backfilling", IEEE TPDS 12(6), 2001): a limit drawn uniformly between the
runtime and (1 + F) times it.

The pool: NODES nodes of CORES cores (1 GiB of memory a core, so cores bind). A job here runs on one node,
so the model's machine is one node: its largest job is a whole node (UHI = log2 CORES). Teams: the model has
no users, so each job goes to one of TEAMS teams with Zipf weights (an assumption: a few teams submit most).

Three schedulers replay the same jobs on a simulated clock, with a pass at every arrival and every end (a
job ends at its runtime, not its limit):
- `easy`: the reference, written here: FCFS with one reservation for the head job (on the node where it can
  start first, from the running jobs' limits) and backfill of anything that does not delay it (Mu'alem &
  Feitelson 2001: ends before the reservation starts, or takes only the cores it leaves over).
- `pool_fcfs`: the real pool.placement.backfill.place, jobs in submit order.
- `pool_fair_share`: the same, jobs in the order pool.placement.backfill.serve_order gives, as
  pool.scheduler.fair_share_order calls it: the jobs waiting longer than the bound (E31_FAIRSHARE_MAX_WAIT_S,
  or --max-wait) by submit time, then the others by their team's decayed usage, then submit time. The usage
  that function reads from the database is kept here from the same decay (accounting.fairshare.decay, with
  released holds' core-seconds added at release as add_usage does, plus the running holds' core-seconds so
  far). With several --max-wait values, one `pool_fair_share` run each.

Prints, for each: mean wait, mean bounded slowdown (tau = TAU_S), utilisation, the largest wait of a big
job (at least BIG_SHARE of a node: a job here has one node, so the big ones are those needing most of it),
and how many jobs wait more than twice their EASY wait, a wait under FLOOR_S counting as FLOOR_S so tiny
waits do not dominate.
The headline lines last; the goal: the fair-share pool's bounded slowdown at most EASY's.

Run: .venv/bin/python bench/policy.py [--jobs N] [--seed S] [--load L]
"""

import argparse
import heapq
import math
import os
import random
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# --- The pool ---
NODES = 100
CORES = 16  # a node's cores: the model's machine size (2^UHI)
MEMORY_PER_CORE_MB = 1024
TEAMS = 8

# --- Lublin & Feitelson 2003, batch jobs (the authors' generator m_lublin99.c, Parallel Workloads Archive) ---
# Sizes: P(serial), P(power of two | parallel draw), the two-stage uniform on log2(size): [ULOW, UMED] with
# UPROB, else [UMED, UHI]. UHI is log2 of the machine (7 for their 128 nodes, log2 CORES here); UMED keeps
# the model's distance below it (UHI - 2, inside the paper's UHI - 3.5 .. UHI - 1.5).
SERIAL_PROB = 0.2927
POW2_PROB = 0.6686
ULOW = 1.2
UHI = math.log2(CORES)
UMED = UHI - 2
UPROB = 0.875
# Runtimes: log(runtime) is hyper-gamma: gamma(A1, B1) with probability p = PA * size + PB, else gamma(A2, B2)
# (shape, scale); a draw above TOO_MUCH_TIME (e^12 s, about 45 h) is drawn again. `size` is in the model's
# units: the job's share of its machine times 128, so the size-runtime correlation spans the model's range.
A1, B1 = 6.57, 0.823
A2, B2 = 639.1, 0.0156
PA, PB = -0.003, 0.6986
TOO_MUCH_TIME = 12.0
MODEL_MACHINE = 128
# Arrivals: log(inter-arrival s) is gamma(AARR * ARAR, BARR) at rush-hour pace; the day's 48 half-hour buckets
# weigh it by the gamma(ANUM, BNUM) density over the hours (the day shifted to start at CYCLIC_DAY_START),
# normalised to a mean of 1: time passes faster through the busy buckets. A draw above e^13 s is drawn again.
AARR, BARR, ARAR = 6.0415, 0.8531, 1.0519
ANUM, BNUM = 6.1271, 5.2740
CYCLIC_DAY_START = 11
BUCKETS = 48
BUCKET_S = 86_400 // BUCKETS
TOO_MUCH_ARRIVE_TIME = 13.0
# --- Time limits: Mu'alem & Feitelson 2001's f-model, limit ~ U(runtime, (1 + F) * runtime), whole minutes ---
F = 3

# --- What is measured ---
TAU_S = 10  # bounded slowdown: max(1, (wait + run) / max(run, TAU_S))
BIG_SHARE = 1 / 2  # a big job takes at least this share of a node
FLOOR_S = 600  # "waits more than twice its EASY wait": a wait under this counts as this
LOAD = 0.85  # offered load the arrivals are scaled to (core-seconds asked / core-seconds the pool has)
EPOCH = datetime(2026, 1, 5, tzinfo=UTC)


@dataclass(frozen=True)
class Job:
    id: uuid.UUID
    team: int
    arrival: int  # s from the start
    cores: int
    runtime: int  # s
    limit: int  # s, >= runtime


# --- The workload ---


def gamma_density(x: float, shape: float, scale: float) -> float:
    if x <= 0:
        return 0.0
    return math.exp((shape - 1) * math.log(x) - x / scale - math.lgamma(shape) - shape * math.log(scale))


def bucket_weights() -> list[float]:
    """Each half-hour's share of the day's arrivals, normalised to a mean of 1 (bucket 0 is midnight)."""
    weights = [0.0] * BUCKETS
    steps = 64
    for i in range(CYCLIC_DAY_START, BUCKETS + CYCLIC_DAY_START):
        # The model's mass of bucket i: the gamma(ANUM, BNUM) probability of [i - 0.5, i + 0.5].
        mass = sum(gamma_density(i - 0.5 + (k + 0.5) / steps, ANUM, BNUM) for k in range(steps)) / steps
        weights[(i - 1) % BUCKETS] = mass
    mean = sum(weights) / BUCKETS
    return [w / mean for w in weights]


def arrivals(gaps: list[float], stretch: float) -> list[int]:
    """Arrival times from rush-hour inter-arrival times: a gap is worth `gap / BUCKET_S` points and crossing a
    bucket costs its weight, so more arrivals land in a busy bucket (a high weight) than in a quiet one."""
    weights = bucket_weights()
    bucket, spent, times = 0, 0.0, []  # spent: the share of the current bucket gone by
    for gap in gaps:
        points = gap * stretch / BUCKET_S
        while points > weights[bucket % BUCKETS] * (1 - spent):
            points -= weights[bucket % BUCKETS] * (1 - spent)
            bucket, spent = bucket + 1, 0.0
        spent += points / weights[bucket % BUCKETS]
        times.append(int((bucket + spent) * BUCKET_S))
    return times


def size(rng: random.Random) -> int:
    u = rng.random()
    if u <= SERIAL_PROB:
        return 1
    low, high = (ULOW, UMED) if rng.random() <= UPROB else (UMED, UHI)
    log2 = rng.uniform(low, high)
    if u <= SERIAL_PROB + POW2_PROB:
        log2 = round(log2)
    return max(1, min(CORES, round(2**log2)))


def runtime(rng: random.Random, cores: int) -> int:
    p = min(1.0, max(0.0, PA * cores * MODEL_MACHINE / CORES + PB))
    while True:
        shape, scale = (A1, B1) if rng.random() <= p else (A2, B2)
        log_runtime = rng.gammavariate(shape, scale)
        if log_runtime <= TOO_MUCH_TIME:
            return max(1, round(math.exp(log_runtime)))


def workload(count: int, seed: int, load: float) -> list[Job]:
    """`count` jobs, their arrivals stretched so the offered load over their span is `load`."""
    rng = random.Random(seed)
    gaps = []
    for _ in range(count):
        while (log_gap := rng.gammavariate(AARR * ARAR, BARR)) > TOO_MUCH_ARRIVE_TIME:
            pass
        gaps.append(math.exp(log_gap))
    shapes = []
    teams = rng.choices(range(TEAMS), weights=[1 / (k + 1) for k in range(TEAMS)], k=count)
    for team in teams:
        cores = size(rng)
        run = runtime(rng, cores)
        limit = 60 * math.ceil(rng.uniform(run, (1 + F) * run) / 60)
        shapes.append((team, cores, run, limit))
    asked = sum(cores * run for _, cores, run, _ in shapes)
    stretch = 1.0
    for _ in range(4):  # the span is nearly proportional to the stretch: a few rounds settle it
        times = arrivals(gaps, stretch)
        span = max(times[-1] - times[0], 1)
        stretch *= asked / (NODES * CORES * span) / load
    times = arrivals(gaps, stretch)
    ids = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(count)]
    return [Job(ids[i], team, times[i], cores, run, limit) for i, (team, cores, run, limit) in enumerate(shapes)]


# --- The replay ---


@dataclass
class Started:
    job: Job
    node: int
    cpu_ids: list[int]
    at: int


class Replay:
    """A simulated pool: the jobs arrive, a pass runs at each arrival and end; `schedule` decides the starts."""

    def __init__(self, jobs: list[Job], on_end: Callable[["Started", int], None] | None = None) -> None:
        self.on_end = on_end
        self.jobs = sorted(jobs, key=lambda j: (j.arrival, j.id))
        self.free: dict[int, list[int]] = {n: list(range(CORES)) for n in range(1, NODES + 1)}
        self.running: dict[uuid.UUID, Started] = {}
        self.waiting: list[Job] = []
        self.started: dict[uuid.UUID, int] = {}
        self.passes = 0

    def run(self, schedule: Callable[["Replay", int], list[tuple[Job, int, list[int]]]]) -> dict[uuid.UUID, int]:
        ends: list[tuple[int, uuid.UUID]] = []
        i = 0
        while i < len(self.jobs) or ends:
            now = min(self.jobs[i].arrival if i < len(self.jobs) else math.inf, ends[0][0] if ends else math.inf)
            while ends and ends[0][0] <= now:
                self.end(self.running.pop(heapq.heappop(ends)[1]), int(now))
            while i < len(self.jobs) and self.jobs[i].arrival <= now:
                self.waiting.append(self.jobs[i])
                i += 1
            if not self.waiting:
                continue
            self.passes += 1
            for job, node, cpu_ids in schedule(self, int(now)):
                gone = set(cpu_ids)
                assert gone <= set(self.free[node]), "a core was taken twice"
                self.free[node] = [c for c in self.free[node] if c not in gone]
                self.running[job.id] = Started(job, node, cpu_ids, int(now))
                self.started[job.id] = int(now)
                heapq.heappush(ends, (int(now) + job.runtime, job.id))
            placed = {started.job.id for started in self.running.values()}
            self.waiting = [j for j in self.waiting if j.id not in placed]
        return {job.id: self.started[job.id] - job.arrival for job in self.jobs}

    def end(self, started: Started, now: int) -> None:
        if self.on_end is not None:
            self.on_end(started, now)
        self.free[started.node] = sorted(self.free[started.node] + started.cpu_ids)


class FairShare:
    """Each team's usage as accounting.fairshare keeps it: released holds' core-seconds decayed from their
    release, plus what running holds have held so far (pool.scheduler.team_usage)."""

    def __init__(self) -> None:
        from accounting.fairshare import decay  # after django.setup(): it imports the models

        self.decay = decay
        self.usage: dict[int, tuple[float, datetime]] = {}

    def release(self, started: Started, now: int) -> None:
        at = EPOCH + timedelta(seconds=now)
        core_seconds = started.job.cores * (now - started.at)
        value, as_of = self.usage.get(started.job.team, (0.0, at))
        self.usage[started.job.team] = (self.decay(value, since=as_of, until=at) + core_seconds, at)

    def at(self, replay: Replay, now: int) -> dict[int, float]:
        at = EPOCH + timedelta(seconds=now)
        usage = {team: self.decay(value, since=as_of, until=at) for team, (value, as_of) in self.usage.items()}
        for started in replay.running.values():
            usage[started.job.team] = usage.get(started.job.team, 0.0) + started.job.cores * (now - started.at)
        return usage


def pool_scheduler(fair_share: FairShare | None, reservations: int, max_wait_s: int = 0):
    """A pass of the real placement over the replay's state, in fair-share (pool.placement.backfill.serve_order, the
    wait bounded by `max_wait_s`) or submit order."""
    from pool.models import Node
    from pool.placement.backfill import place, serve_order
    from pool.placement.types import FreeCapacity, Request, Running, Waiting

    nodes = [
        Node(pk=n, name=f"n{n:03d}", state=Node.State.ACTIVE, cpu_ids=list(range(CORES)),
             memory_mb=CORES * MEMORY_PER_CORE_MB, gpu_ids=[], features=[])
        for n in range(1, NODES + 1)
    ]  # fmt: skip

    def schedule(replay: Replay, now: int) -> list[tuple[Job, int, list[int]]]:
        at = EPOCH + timedelta(seconds=now)
        by_id = {j.id: j for j in replay.waiting}
        waiting = [
            Waiting(j.id, j.team, EPOCH + timedelta(seconds=j.arrival), 1,
                    Request(j.cores, j.cores * MEMORY_PER_CORE_MB, 0), j.limit)
            for j in sorted(replay.waiting, key=lambda j: (j.arrival, str(j.id)))
        ]  # fmt: skip
        if fair_share:
            waiting = serve_order(waiting, fair_share.at(replay, now), now=at, max_wait_s=max_wait_s)
        free = {n: FreeCapacity(cpu_ids, len(cpu_ids) * MEMORY_PER_CORE_MB, []) for n, cpu_ids in replay.free.items()}
        running = [
            Running(s.node, s.cpu_ids, s.job.cores * MEMORY_PER_CORE_MB, [],
                    EPOCH + timedelta(seconds=s.at + s.job.limit), job_id=s.job.id, team_id=s.job.team,
                    started_at=EPOCH + timedelta(seconds=s.at))
            for s in replay.running.values()
        ]  # fmt: skip
        plan = place(waiting, nodes, free, running=running, now=at, limit=len(waiting), reservations=reservations)
        return [(by_id[p.job_id], p.node.pk, p.cpu_set) for p in plan.placements]

    return schedule


def easy(replay: Replay, now: int) -> list[tuple[Job, int, list[int]]]:
    """EASY backfilling on one-node jobs: start jobs in submit order while they fit (best fit: the node with the
    fewest free cores that holds it); the first that does not gets a reservation on the node where it can start
    first by the running jobs' limits (its shadow time; the cores it leaves over there are the extra); a job
    behind starts now if it fits on another node, or on that node when it ends by the shadow time or takes
    only extra cores."""
    free = {n: len(cpu_ids) for n, cpu_ids in replay.free.items()}
    taken: dict[int, int] = {}
    starts: list[tuple[Job, int, list[int]]] = []

    def best_fit(job: Job, allowed: Callable[[int], bool]) -> int | None:
        fitting = [(free[n], n) for n in free if free[n] >= job.cores and allowed(n)]
        return min(fitting)[1] if fitting else None

    def start(job: Job, node: int) -> None:
        offset = taken.get(node, 0)
        starts.append((job, node, replay.free[node][offset : offset + job.cores]))
        taken[node] = offset + job.cores
        free[node] -= job.cores

    queue = sorted(replay.waiting, key=lambda j: (j.arrival, str(j.id)))
    head = 0
    while head < len(queue) and (node := best_fit(queue[head], lambda n: True)) is not None:
        start(queue[head], node)
        head += 1
    if head == len(queue):
        return starts
    shadow, shadow_node, extra = reservation(replay, queue[head], free, now, starts)
    for job in queue[head + 1 :]:
        fits_before = now + job.limit <= shadow

        def allowed(n: int, job: Job = job, fits_before: bool = fits_before, extra: int = extra) -> bool:
            return n != shadow_node or fits_before or job.cores <= extra

        if (node := best_fit(job, allowed)) is not None:
            if node == shadow_node and not fits_before:
                extra -= job.cores
            start(job, node)
    return starts


def reservation(
    replay: Replay, head: Job, free: dict[int, int], now: int, starts: list[tuple[Job, int, list[int]]]
) -> tuple[int, int, int]:
    """(shadow time, its node, the extra cores there then) of the head job: the earliest a node has its cores,
    by the limits of the jobs running and of those this pass starts."""
    ends: dict[int, list[tuple[int, int]]] = {}
    for s in replay.running.values():
        ends.setdefault(s.node, []).append((s.at + s.job.limit, s.job.cores))
    for job, node, _ in starts:
        ends.setdefault(node, []).append((now + job.limit, job.cores))
    best = (math.inf, 0, 0)
    for node, count in free.items():
        moment = now
        for end, cores in sorted(ends.get(node, [])):
            if count >= head.cores:
                break
            moment, count = end, count + cores
        if count >= head.cores and moment < best[0]:
            best = (moment, node, count - head.cores)
    return int(best[0]), best[1], best[2]


# --- The figures ---


@dataclass(frozen=True)
class Figures:
    mean_wait_s: float
    mean_bounded_slowdown: float
    utilisation: float
    big_max_wait_s: int
    seconds: float
    passes: int


def figures(jobs: list[Job], waits: dict[uuid.UUID, int], seconds: float, passes: int) -> Figures:
    # Utilisation while jobs arrive: the busy core-seconds inside [first arrival, last arrival], so the
    # long tail after the last arrival (a pool draining) does not dilute it.
    first, last = min(j.arrival for j in jobs), max(j.arrival for j in jobs)
    used = sum(
        j.cores * max(0, min(last, j.arrival + waits[j.id] + j.runtime) - max(first, j.arrival + waits[j.id]))
        for j in jobs
    )
    slowdowns = [max(1.0, (waits[j.id] + j.runtime) / max(j.runtime, TAU_S)) for j in jobs]
    big = [waits[j.id] for j in jobs if j.cores >= BIG_SHARE * CORES]
    return Figures(
        mean_wait_s=sum(waits.values()) / len(jobs),
        mean_bounded_slowdown=sum(slowdowns) / len(jobs),
        utilisation=used / (NODES * CORES * (last - first)),
        big_max_wait_s=max(big, default=0),
        seconds=seconds,
        passes=passes,
    )


def against_easy(jobs: list[Job], waits: dict[uuid.UUID, int], easy_waits: dict[uuid.UUID, int]) -> tuple[int, float]:
    """(jobs waiting more than twice their EASY wait, the worst ratio), each wait floored at FLOOR_S."""
    ratios = [max(waits[j.id], FLOOR_S) / max(easy_waits[j.id], FLOOR_S) for j in jobs]
    return sum(r > 2 for r in ratios), max(ratios)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=6000)
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--load", type=float, default=LOAD)
    parser.add_argument("--reservations", type=int, help="jobs a pass reserves for (default: pool.placement's)")
    parser.add_argument("--max-wait", type=int, nargs="+", help="fair-share's wait bound(s) in s, 0 for none "
                        "(default: E31_FAIRSHARE_MAX_WAIT_S)")  # fmt: skip
    parser.add_argument("--no-fcfs", action="store_true", help="leave out the pool in submit order")
    args = parser.parse_args()
    # No database: unsaved Node rows and the settings' fair-share half-life are all the apps are asked for.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "e31site.settings")
    os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/e31_bench")
    import django

    django.setup()
    from _setup import machine

    from pool.placement.backfill import RESERVATIONS

    reservations = RESERVATIONS if args.reservations is None else args.reservations
    from django.conf import settings

    jobs = workload(args.jobs, args.seed, args.load)
    span_h = (max(j.arrival for j in jobs) - min(j.arrival for j in jobs)) / 3600
    big = sum(j.cores >= BIG_SHARE * CORES for j in jobs)
    print(machine())
    print(f"{len(jobs)} jobs (seed {args.seed}) over {span_h:.0f} h on {NODES} nodes x {CORES} cores; offered load "
          f"{args.load:.2f}; serial {sum(j.cores == 1 for j in jobs)}, big (>= {BIG_SHARE * CORES:.0f} cores) {big}; "
          f"median runtime {sorted(j.runtime for j in jobs)[len(jobs) // 2]} s; limits f-model F={F}; "
          f"{TEAMS} teams (Zipf); fair-share half-life {settings.E31_FAIRSHARE_HALF_LIFE_S} s; "
          f"the pool reserves for {reservations} jobs a pass")  # fmt: skip

    max_waits = args.max_wait or [settings.E31_FAIRSHARE_MAX_WAIT_S]
    print(f"fair-share wait bound (E31_FAIRSHARE_MAX_WAIT_S): {', '.join(f'{s} s' for s in max_waits)}")
    results: dict[str, tuple[Figures, dict[uuid.UUID, int]]] = {}
    runs: list[tuple[str, Callable, Callable | None]] = [("easy", easy, None)]
    if not args.no_fcfs:
        runs.append(("pool_fcfs", pool_scheduler(None, reservations), None))
    for max_wait in max_waits:
        fair_share = FairShare()
        name = "pool_fair_share" if len(max_waits) == 1 else f"pool_fair_share_max_wait_{max_wait}"
        runs.append((name, pool_scheduler(fair_share, reservations, max_wait), fair_share.release))
    for name, schedule, ends in runs:
        replay = Replay(jobs, on_end=ends)
        began = time.perf_counter()
        waits = replay.run(schedule)
        results[name] = (figures(jobs, waits, time.perf_counter() - began, replay.passes), waits)

    easy_figures, easy_waits = results["easy"]
    for name, (f, waits) in results.items():
        over, worst = against_easy(jobs, waits, easy_waits)
        print(f"{name}: mean wait {f.mean_wait_s / 60:.1f} min, mean bounded slowdown {f.mean_bounded_slowdown:.2f}, "
              f"utilisation {f.utilisation:.1%}, largest big-job wait {f.big_max_wait_s / 3600:.1f} h; "
              f"over twice the EASY wait (floor {FLOOR_S} s): {over} ({over / len(jobs):.1%}), worst "
              f"{worst:.1f}x; {f.passes} passes in {f.seconds:.1f} s")  # fmt: skip
    fair, fair_waits = results[runs[-1][0]]  # the last bound asked for
    over, worst = against_easy(jobs, fair_waits, easy_waits)
    # Whose jobs wait longer than under EASY: fair-share means to delay the teams that used the most.
    later = [j for j in jobs if max(fair_waits[j.id], FLOOR_S) > 2 * max(easy_waits[j.id], FLOOR_S)]
    by_team = ", ".join(
        f"t{team}: {sum(j.team == team for j in later)} of {sum(j.team == team for j in jobs)}" for team in range(TEAMS)
    )
    print(f"{runs[-1][0]} over twice the EASY wait, by team (t0 submits most): {by_team}")
    print(f"easy_bounded_slowdown: {easy_figures.mean_bounded_slowdown:.2f}")
    print(f"pool_fair_share_bounded_slowdown: {fair.mean_bounded_slowdown:.2f}")
    print(f"bounded_slowdown_vs_easy_ratio: {fair.mean_bounded_slowdown / easy_figures.mean_bounded_slowdown:.2f}")
    print(f"pool_fair_share_over_twice_easy_wait: {over / len(jobs) * 100:.1f} % of jobs (worst {worst:.1f}x)")


if __name__ == "__main__":
    main()
