"""Concurrent scheduler passes on PostgreSQL: capacity is never double-booked, each job is held once,
a pass that meets another waits on the pool's lock instead of failing, and a heartbeat waits for no pass."""

import threading
import time
from collections import Counter, defaultdict

import pytest
from django.db import connection, transaction
from django.utils import timezone

from accounting.models import Record
from accounting.verification import verify_ledger
from jobs.lifecycle import actions
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Outcome, Stage
from jobs.scheduling import dispatch
from jobs.submit import service as submission
from pool.models import HeldCore, Hold, Node
from pool.nodes import Capacity, heartbeat, register, set_state
from pool.scheduler import lock_pool
from tests.factories import submit_job
from tests.workers import concurrently, wait_until

NODES, CORES, NODE_MEMORY_MB, JOB_MEMORY_MB = 4, 4, 1024, 256  # cores and memory run out together
JOBS = 60
SCHEDULERS, PASSES = 8, 4
DEADLINE_S = 60


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch):
    # Submits and releases nudge the scheduler through Celery; here the tests run the passes.
    monkeypatch.setattr(dispatch, "request_schedule", lambda: None)
    monkeypatch.setattr(submission, "request_schedule", lambda: None)


@pytest.fixture
def pool(transactional_db) -> list[Node]:
    capacity = Capacity(cpu_ids=list(range(CORES)), memory_mb=NODE_MEMORY_MB, gpu_ids=[])
    return [register(f"n{i}", capacity, now=timezone.now()) for i in range(NODES)]


@pytest.fixture
def waiting(transactional_db, pool, member, team, teammate, other_team, outsider) -> list[Job]:
    people = [(member, team), (teammate, team), (outsider, other_team)]
    return [submit_job(*people[i % 3], name=f"batch #{i}", cpus=1, memory_mb=JOB_MEMORY_MB) for i in range(JOBS)]


def passes(made: list[Hold], count: int = PASSES):
    def worker():
        for _ in range(count):
            made.extend(schedule_pass(now=timezone.now()))

    return worker


def assert_capacity_respected() -> None:
    """Per node, the active holds name the node's own cores, never the same core twice, and stay
    within its memory; the HeldCore rows are exactly those cores; a job has one active hold at most."""
    nodes = {n.pk: n for n in Node.objects.all()}
    active = list(Hold.objects.filter(released_at__isnull=True))
    by_node: dict[int, list[Hold]] = defaultdict(list)
    for hold in active:
        by_node[hold.node_id].append(hold)
    for node_id, holds in by_node.items():
        cores = [c for h in holds for c in h.cpu_set]
        assert len(cores) == len(set(cores)), f"a core of {nodes[node_id]} is held twice: {sorted(cores)}"
        assert set(cores) <= set(nodes[node_id].cpu_ids)
        assert sum(h.memory_mb for h in holds) <= nodes[node_id].memory_mb
    held_cores = sorted(HeldCore.objects.values_list("node_id", "core", "hold_id"))
    assert held_cores == sorted((h.node_id, c, h.pk) for h in active for c in h.cpu_set)
    assert not [j for j, n in Counter(h.job_id for h in active).items() if n > 1], "a job is held twice at once"
    on_a_node = set(Job.objects.filter(stage__in=[Stage.RENT, Stage.RUN, Stage.OUTPUT]).values_list("pk", flat=True))
    assert on_a_node == {h.job_id for h in active}


def assert_capacity_respected_in_one_snapshot() -> None:
    with transaction.atomic():
        with connection.cursor() as cursor:  # every query below sees the same committed state
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        assert_capacity_respected()


def watch(stop: threading.Event, checks: list[int]):
    """Check the capacity invariants again and again while other threads work."""

    def worker():
        while not stop.is_set():
            assert_capacity_respected_in_one_snapshot()
            checks.append(1)
            time.sleep(0.005)

    return worker


def until_done(*, stop: threading.Event, what):
    def worker():
        deadline = time.monotonic() + DEADLINE_S / 2
        try:
            while what():
                assert time.monotonic() < deadline, "the work did not finish in time"
        finally:
            stop.set()

    return worker


def test_concurrent_passes_hold_each_core_once_and_each_job_once(waiting, pool):
    made: list[Hold] = []

    errors = concurrently(*[passes(made) for _ in range(SCHEDULERS)])

    assert errors == []
    assert_capacity_respected()
    holds = list(Hold.objects.all())
    assert len(holds) == NODES * CORES  # the pool is full: as many 1-core holds as cores
    assert sorted(h.pk for h in made) == sorted(h.pk for h in holds)  # each reported by the one pass that made it
    assert len({h.job_id for h in holds}) == len(holds)  # one hold per job
    assert HeldCore.objects.count() == NODES * CORES
    assert Job.objects.filter(stage=Stage.RENT).count() == NODES * CORES
    assert Job.objects.filter(stage=Stage.SUBMIT).count() == JOBS - NODES * CORES
    # the teams took turns, each's older jobs first (a team's usage is 0 until time passes with its holds)
    red = [j for j in waiting if j.team_id == waiting[0].team_id]
    blue = [j for j in waiting if j.team_id != waiting[0].team_id]
    turns = sorted([*enumerate(red), *enumerate(blue)], key=lambda turn: (turn[0], turn[1].submitted_at))
    assert {h.job_id for h in holds} == {j.pk for _, j in turns[: NODES * CORES]}


def run_or_cancel(job: Job) -> None:
    """What a node's worker does with a held job (every seventh is cancelled before it runs)."""
    if waiting_index(job) % 7 == 0:
        actions.cancel(job, now=timezone.now())
        return
    if not actions.start_run(job, now=timezone.now()):
        return  # another worker claimed it
    actions.finish_run(job, outcome=Outcome.SUCCEEDED, exit_code=0, reason="", now=timezone.now())
    actions.release(job, outcome=Outcome.SUCCEEDED, reason="", exit_code=0, now=timezone.now(), attempt=job.attempt)


def waiting_index(job: Job) -> int:
    return int(job.name.rsplit("#", 1)[1])


def test_releases_and_passes_running_together_hold_and_release_every_job_exactly_once(waiting, pool):
    made: list[Hold] = []
    concurrently(*[passes(made, 1) for _ in range(SCHEDULERS)])  # the pool is full
    stop, checks = threading.Event(), []

    def not_all_released():
        return Job.objects.exclude(stage=Stage.RELEASE).exists()

    def worker():
        while not stop.is_set():
            for job in Job.objects.filter(stage=Stage.RENT).order_by("?")[:4]:
                run_or_cancel(job)

    def scheduler():
        while not stop.is_set():
            made.extend(schedule_pass(now=timezone.now()))

    errors = concurrently(
        *[scheduler for _ in range(SCHEDULERS)],
        *[worker for _ in range(4)],
        watch(stop, checks),
        until_done(stop=stop, what=not_all_released),
    )

    assert errors == []
    assert checks, "the capacity was never checked while the work ran"
    assert_capacity_respected()
    jobs = list(Job.objects.all())
    assert all(j.stage == Stage.RELEASE for j in jobs)
    expected = {j.pk: Outcome.CANCELLED if waiting_index(j) % 7 == 0 else Outcome.SUCCEEDED for j in jobs}
    assert {j.pk: j.outcome for j in jobs} == expected
    holds = list(Hold.objects.all())
    assert sorted(h.job_id for h in holds) == sorted(j.pk for j in jobs)  # every job held exactly once
    assert sorted(h.pk for h in made) == sorted(h.pk for h in holds)
    assert all(h.released_at is not None for h in holds)
    assert not HeldCore.objects.exists()
    records = list(Record.objects.all())
    assert sorted(r.hold_id for r in records) == sorted(h.pk for h in holds)  # one record per hold
    assert {r.job_id: r.outcome for r in records} == expected
    assert [r.sequence for r in sorted(records, key=lambda r: r.sequence)] == list(range(1, JOBS + 1))
    assert verify_ledger()


def test_a_job_cancelled_while_passes_run_is_never_held_afterwards(waiting, pool):
    doomed = waiting[::2]
    made: list[Hold] = []
    cancelled_at: dict = {}

    def canceller(jobs):
        def worker():
            for job in jobs:
                actions.cancel(job, now=timezone.now())
                cancelled_at[job.pk] = timezone.now()

        return worker

    errors = concurrently(
        *[passes(made) for _ in range(SCHEDULERS)],
        canceller(doomed[0::2]),
        canceller(doomed[1::2]),
    )
    assert errors == []
    assert len(cancelled_at) == len(doomed)
    # More passes after the cancels: the cores they freed go to the others.
    errors = concurrently(*[passes(made, 2) for _ in range(SCHEDULERS)])

    assert errors == []
    assert_capacity_respected()
    doomed_ids = {j.pk for j in doomed}
    for job in Job.objects.filter(pk__in=doomed_ids):
        assert (job.stage, job.outcome) == (Stage.RELEASE, Outcome.CANCELLED)
    doomed_holds = list(Hold.objects.filter(job__in=doomed_ids))
    assert len({h.job_id for h in doomed_holds}) == len(doomed_holds)  # held before the cancel, at most once
    assert all(h.released_at is not None for h in doomed_holds)
    assert all(h.released_at <= cancelled_at[h.job_id] for h in doomed_holds)
    records = {r.hold_id: r.outcome for r in Record.objects.all()}
    assert records == {h.pk: Outcome.CANCELLED for h in doomed_holds}  # one record each, nothing else released
    active = Hold.objects.filter(released_at__isnull=True)
    assert active.count() == NODES * CORES  # the others fill the pool again
    assert not active.filter(job__in=doomed_ids).exists()
    assert Hold.objects.values("job").distinct().count() == Hold.objects.count()


def test_concurrent_passes_reject_a_job_too_big_for_the_pool_once_and_hold_the_rest(
    waiting, pool, member, team, other_team, outsider
):
    too_big = [submit_job(*who, cpus=CORES + 1) for who in [(member, team), (outsider, other_team)] * 5]
    made: list[Hold] = []

    errors = concurrently(*[passes(made) for _ in range(SCHEDULERS)])

    assert errors == []
    for job in Job.objects.filter(pk__in=[j.pk for j in too_big]):
        assert (job.stage, job.outcome) == (Stage.RELEASE, Outcome.REJECTED)
        assert job.reason.startswith(f"can never be held: needs {CORES + 1} cores")
    assert not Hold.objects.filter(job__in=too_big).exists() and not Record.objects.exists()
    assert len(made) == Hold.objects.count() == NODES * CORES
    assert_capacity_respected()


def _in_thread(work) -> threading.Thread:
    def run():
        try:
            work()
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _waiting_on_a_lock(query_start: str) -> bool:
    """Whether a backend of this test's database running a statement that starts with `query_start` waits on
    a lock (another xdist worker's passes use another database)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE %s",
            [query_start + "%"],
        )
        return cursor.fetchone()[0] > 0


def test_a_heartbeat_does_not_wait_for_a_pass_but_a_drain_does(pool):
    in_pass, end_pass = threading.Event(), threading.Event()

    def a_long_pass():
        with transaction.atomic():
            lock_pool()
            in_pass.set()
            end_pass.wait(DEADLINE_S)

    passing = _in_thread(a_long_pass)
    assert in_pass.wait(DEADLINE_S)
    beat = _in_thread(lambda: heartbeat("n0", now=timezone.now()))
    beat.join(DEADLINE_S)
    assert not beat.is_alive() and passing.is_alive()  # the beat landed while the pass held the pool
    drain = _in_thread(lambda: set_state(pool[1], Node.State.DRAINING, now=timezone.now(), reason="disk"))
    wait_until(lambda: _waiting_on_a_lock("SELECT pg_advisory_xact_lock"), DEADLINE_S, message="the drain to wait")
    assert Node.objects.get(name="n1").state == Node.State.ACTIVE
    end_pass.set()
    for thread in (passing, drain):
        thread.join(DEADLINE_S)
    assert Node.objects.get(name="n1").state == Node.State.DRAINING
