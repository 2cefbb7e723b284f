"""A real pool: two nodes (two `celery worker` processes, one core each) sharing the work.

Each node is a real worker process on Redis and the test database, running real containers; the
tests drain and resume nodes, kill a node's worker with SIGKILL mid-job, and restart it.
"""

from datetime import timedelta

import docker
import pytest
from django.conf import settings
from django.utils import timezone

from accounting.models import Record
from e31site.celery import app
from jobs.lifecycle import actions
from jobs.models import Job, Outcome, RuntimeImage, Stage
from jobs.scheduling.dispatch import dispatch_run
from jobs.submit.declaration import Declaration
from jobs.submit.service import submit
from pool.models import Hold, Node, queue_for
from pool.nodes import Capacity, detect_capacity, heartbeat, register, set_state
from tests.conftest import ROOT, STACK_NODE, wait_for_release, wait_until, worker_env
from tests.factories import submit_job
from tests.workers import NodeWorker, quiesce_all, resume_all
from worker import reaper
from worker.sandbox.docker import JOB_LABEL, NAMESPACE_LABEL, NODE_LABEL

pytestmark = [pytest.mark.docker, pytest.mark.celery]

NODES = {"n1": "0", "n2": "1"}  # node name → the core it lends (this machine has two)
NODE_MEMORY_MB = 2048
HEARTBEAT_S = 1
LOST_S = 3  # above the 2 s heartbeat of the session's worker (node STACK_NODE), so only a dead node is lost


class PoolWorkers:
    """The workers of the pool's nodes (tests.workers.NodeWorker), started, killed and restarted by name."""

    def __init__(self, env: dict[str, str]):
        log_dir = ROOT / "var" / "log"
        self.workers = {
            name: NodeWorker(
                name,
                # Each machine has its own scratch disk; the store is shared.
                env={**env, "E31_NODE_CPUS": cores, "E31_SCRATCH_DIR": str(settings.VAR_DIR / f"scratch-{name}")},
                log_path=log_dir / f"test-celery-{settings.E31_SANDBOX_NAMESPACE}-{name}.log",
            )
            for name, cores in NODES.items()
        }
        self.logs = {name: worker.log_path for name, worker in self.workers.items()}

    def alive(self, name: str) -> bool:
        return self.workers[name].alive()

    def start(self, *names: str) -> None:
        """Start the nodes' workers (at once) and wait until each is ready."""
        for name in names:
            self.workers[name].start(wait=False)
        for name in names:
            self.workers[name].wait_ready()

    def log_since(self, name: str, offset: int = 0) -> str:
        return self.workers[name].log_since(offset)

    def kill(self, name: str) -> None:
        self.workers[name].kill()

    def stop(self, name: str) -> None:
        self.workers[name].stop()


@pytest.fixture(scope="module")
def engine():
    return docker.from_env(timeout=30)


@pytest.fixture(scope="module")
def pool_workers(django_db_setup, django_db_blocker, built_images, engine, platform_plane):
    """Two real nodes, n1 (core 0) and n2 (core 1), for the whole module, beside the suite's platform workers.
    Each has a second process, so that a second delivery of a run is taken while the first still runs."""
    from django.db import connection

    env = worker_env(
        E31_NODE_MEMORY_MB=str(NODE_MEMORY_MB), E31_HEARTBEAT_S=str(HEARTBEAT_S), E31_WORKER_CONCURRENCY="2"
    )
    workers = PoolWorkers(env)
    for name in NODES:
        purge(queue_for(name))  # runs left by an earlier suite name jobs that no longer exist
    try:
        workers.start(*NODES)
        yield workers
    finally:
        for name in NODES:
            workers.stop(name)
        # Their heartbeats registered them again after the last flush: the tests of other modules
        # must not see two active nodes whose workers are gone.
        with django_db_blocker.unblock():
            Node.objects.filter(name__in=NODES, holds__isnull=True).delete()
            connection.close()  # else it stays open and the test database cannot be dropped
        for name in NODES:
            for container in containers(engine, **{NODE_LABEL: name}):
                engine.api.remove_container(container["Id"], force=True)


@pytest.fixture
def pool(transactional_db, pool_workers, images, settings):
    """The pool for one test: n1 and n2 registered and running; the session worker's node draining.

    The worker of the other real-stack tests (node STACK_NODE) may be running in this xdist worker:
    its heartbeat registers it again after each flush, and the scheduler would then hold compute on
    it. Registered first and draining, it keeps beating but takes no holds.
    """
    now = timezone.now()
    set_state(register(STACK_NODE, detect_capacity(), now=now), Node.State.DRAINING, now=now)
    resume_all(app)
    dead = [name for name in NODES if not pool_workers.alive(name)]
    if dead:
        pool_workers.start(*dead)
    for name, cores in NODES.items():
        register(name, Capacity(cpu_ids=[int(cores)], memory_mb=NODE_MEMORY_MB, gpu_ids=[]), now=now)
    settings.E31_NODE_LOST_S = LOST_S
    yield pool_workers
    # Leave nothing running behind the next test's back (a restarted node loses its jobs).
    dead = [name for name in NODES if not pool_workers.alive(name)]
    if dead:
        pool_workers.start(*dead)
    for job in Job.objects.exclude(stage=Stage.RELEASE):
        actions.cancel(job, now=timezone.now())
    wait_until(lambda: not Job.objects.exclude(stage=Stage.RELEASE).exists(), 60, message="every job to be released")
    quiesce_all(app)  # nothing may touch the database while it is flushed


# --- helpers --------------------------------------------------------------------------------------


def purge(queue: str) -> int:
    """Drop the messages waiting in a queue; return how many there were."""
    from e31site.celery import app

    with app.connection_for_write() as conn:
        return conn.default_channel.queue_purge(queue) or 0


def containers(engine, **labels) -> list[dict]:
    """Containers of this suite's namespace (running or not) with the given labels, as the engine
    lists them (Id, Labels, State): listing does not inspect, so a container removed meanwhile is fine."""
    filters = [f"{NAMESPACE_LABEL}={settings.E31_SANDBOX_NAMESPACE}", *(f"{k}={v}" for k, v in labels.items())]
    return engine.api.containers(all=True, filters={"label": filters})


def cpuset_of(engine, container: dict) -> str | None:
    try:
        return engine.api.inspect_container(container["Id"])["HostConfig"]["CpusetCpus"]
    except docker.errors.NotFound:  # it ended and was removed since it was listed
        return None


def submit_with_retries(user, team, *, max_retries: int, command: str, time_limit_s: int = 60) -> Job:
    job, _ = submit(
        Declaration(
            team=team, name=f"retries {max_retries}", image=RuntimeImage.objects.get(name="busybox"),
            command=["sh", "-c", command], env={}, cpus=1, memory_mb=64, gpus=0,
            time_limit_s=time_limit_s, output_patterns=[], max_retries=max_retries,
        ),
        user=user,
    )  # fmt: skip
    return job


def wait_until_running(engine, job: Job, node: str) -> Job:
    """Until the job is in RUN on `node` with its container running there."""

    def running():
        job.refresh_from_db()
        if job.stage != Stage.RUN:
            return False
        return [c for c in containers(engine, **{JOB_LABEL: str(job.pk)}) if c["State"] == "running"]

    [container] = wait_until(running, 60, 0.1, message=f"job {job.pk} to run")
    assert container["Labels"][NODE_LABEL] == node
    assert job.active_hold.node.name == node
    return job


def assert_no_core_shared_over_time(holds: list[Hold]) -> None:
    """Holds whose [held_at, released_at) overlap never share a core of one node, and the cores held
    on a node at any moment never exceed what it lends."""
    for a in holds:
        for b in holds:
            if a.pk < b.pk and a.node_id == b.node_id and a.held_at < b.released_at and b.held_at < a.released_at:
                assert not set(a.cpu_set) & set(b.cpu_set), f"{a} and {b} shared a core at once"
    for node in {h.node for h in holds}:
        events = sorted(
            [(h.held_at, len(h.cpu_set)) for h in holds if h.node == node]
            + [(h.released_at, -len(h.cpu_set)) for h in holds if h.node == node],
            key=lambda e: (e[0], e[1]),  # a release at the same instant as a hold comes first
        )
        held = 0
        for _, delta in events:
            held += delta
            assert held <= node.cpus, f"{held} cores held at once on {node.name}, which lends {node.cpus}"


def assert_one_record_per_hold(jobs: list[Job]) -> None:
    holds = list(Hold.objects.filter(job__in=jobs))
    records = {r.hold_id: r for r in Record.objects.filter(job__in=jobs)}
    assert len(records) == len(holds) == Record.objects.filter(job__in=jobs).count()
    for hold in holds:
        record = records[hold.pk]
        assert (record.node, record.cpu_set, record.held_at, record.released_at) == (
            hold.node.name, hold.cpu_set, hold.held_at, hold.released_at)  # fmt: skip


# --- tests ----------------------------------------------------------------------------------------


def test_twelve_jobs_spread_over_both_nodes_and_never_share_a_core(pool, engine, member, team):
    jobs = [submit_job(member, team, command="sleep 0.5", memory_mb=64, name=f"j{i}") for i in range(12)]

    # Sample while they run: a node never runs more jobs than it has cores, and every running
    # container is pinned to its node's core.
    def all_released():
        running = Job.objects.filter(pk__in=[j.pk for j in jobs], stage=Stage.RUN)
        per_node: dict[str, int] = {}
        for hold in Hold.objects.filter(job__in=running, released_at__isnull=True).select_related("node"):
            per_node[hold.node.name] = per_node.get(hold.node.name, 0) + len(hold.cpu_set)
        assert all(count <= 1 for count in per_node.values()), per_node
        by_node: dict[str, list] = {}
        for container in containers(engine):
            if container["State"] == "running":
                by_node.setdefault(container["Labels"][NODE_LABEL], []).append(container)
        for node, on_node in by_node.items():
            assert len(on_node) <= 1, f"{len(on_node)} containers running at once on {node}"
            assert cpuset_of(engine, on_node[0]) in (NODES[node], None)
        return not Job.objects.filter(pk__in=[j.pk for j in jobs]).exclude(stage=Stage.RELEASE).exists()

    wait_until(all_released, 90, 0.1, message="the twelve jobs to be released")

    for job in jobs:
        job.refresh_from_db()
        assert (job.stage, job.outcome, job.attempt) == (Stage.RELEASE, Outcome.SUCCEEDED, 1), job.reason
    holds = list(Hold.objects.filter(job__in=jobs).select_related("node"))
    assert len(holds) == 12 and all(h.released_at is not None for h in holds)
    per_node = {name: [h for h in holds if h.node.name == name] for name in NODES}
    assert all(per_node.values()), {name: len(hs) for name, hs in per_node.items()}
    assert all(h.cpu_set == [int(NODES[h.node.name])] for h in holds)
    assert_no_core_shared_over_time(holds)
    # The runs themselves, not only the holds, never overlap on a node.
    for name in NODES:
        runs = sorted((h.job.started_at, h.job.finished_at) for h in per_node[name])
        assert all(earlier[1] <= later[0] for earlier, later in zip(runs, runs[1:], strict=False)), runs
    assert_one_record_per_hold(jobs)
    assert not Hold.objects.filter(node__name=STACK_NODE).exists()


def test_a_drained_node_takes_no_new_work_until_it_is_resumed(pool, engine, member, team, operator_api):
    # A job already running on n2 when it is drained keeps its hold and finishes there.
    first, second = (submit_job(member, team, command="sleep 2", name=f"before drain {i}") for i in range(2))
    wait_until(lambda: Hold.objects.filter(job__in=[first, second]).count() == 2, 30, message="both jobs held")
    on_n2 = Hold.objects.get(job__in=[first, second], node__name="n2").job

    response = operator_api.post("/api/v1/pool/nodes/n2/drain/", {"reason": "maintenance"})
    assert response.status_code == 200 and response.json()["state"] == "draining", response.content

    drained = [submit_job(member, team, command="sleep 0.3", name=f"drained {i}") for i in range(4)]
    for job in [first, second, *drained]:
        assert wait_for_release(job).outcome == Outcome.SUCCEEDED, job.reason
    assert Hold.objects.get(job=on_n2).node.name == "n2"
    assert {h.node.name for h in Hold.objects.filter(job__in=drained)} == {"n1"}

    response = operator_api.post("/api/v1/pool/nodes/n2/resume/")
    assert response.status_code == 200 and response.json()["state"] == "active", response.content

    resumed = [submit_job(member, team, command="sleep 0.5", name=f"resumed {i}") for i in range(3)]
    for job in resumed:
        assert wait_for_release(job).outcome == Outcome.SUCCEEDED, job.reason
    assert "n2" in {h.node.name for h in Hold.objects.filter(job__in=resumed)}
    assert_one_record_per_hold([first, second, *drained, *resumed])


def lose_n1_mid_run(pool, engine, job: Job) -> tuple[Job, Node]:
    """Kill n1's worker while `job` runs there, let the reaper declare n1 lost; n2 is resumed."""
    wait_until_running(engine, job, "n1")
    # A heartbeat after the run started, so the meter has something to stop at besides the hold.
    wait_until(lambda: Node.objects.filter(name="n1", last_heartbeat__gt=job.started_at).exists(), 10,
               message="a heartbeat of n1 while the job runs")  # fmt: skip
    pool.kill("n1")
    set_state(Node.objects.get(name="n2"), Node.State.ACTIVE, now=timezone.now())
    n1 = Node.objects.get(name="n1")
    silent_since = n1.last_heartbeat
    wait_until(lambda: timezone.now() - silent_since > timedelta(seconds=LOST_S), 10, message="n1 to be silent")
    # The session's worker beats every 2 s, if it runs at all: beat for it, so that only n1 can be
    # found silent (were its node lost, its next beat would make it active again).
    heartbeat(STACK_NODE, now=timezone.now())
    lost = reaper.reap_lost_nodes(now=timezone.now())
    assert lost == ["n1"]
    n1.refresh_from_db()
    assert n1.state == Node.State.OFFLINE and n1.last_heartbeat == silent_since
    return job, n1


def restart_n1_and_check_it_cleans_up(pool, engine, job: Job) -> None:
    pool.start("n1")
    wait_until(lambda: Node.objects.get(name="n1").state == Node.State.ACTIVE, 10, message="n1 to be active")
    assert containers(engine, **{JOB_LABEL: str(job.pk)}) == []


def test_a_node_killed_mid_job_is_lost_and_its_job_released_metered_to_its_last_heartbeat(pool, engine, member, team):
    set_state(Node.objects.get(name="n2"), Node.State.DRAINING, now=timezone.now())
    job = submit_with_retries(member, team, max_retries=0, command="sleep 60", time_limit_s=120)
    wait_until_running(engine, job, "n1")

    # A second delivery of the run while it runs does nothing: the run's watcher holds its lock.
    offset = pool.logs["n1"].stat().st_size
    dispatch_run(job.pk, queue_for("n1"))
    wait_until(lambda: f"job {job.pk}: its run is watched by another process" in pool.log_since("n1", offset), 20,
               message="n1 to ignore the second delivery")  # fmt: skip
    job.refresh_from_db()
    assert (job.stage, job.attempt) == (Stage.RUN, 1)
    assert len(containers(engine, **{JOB_LABEL: str(job.pk)})) == 1

    job, n1 = lose_n1_mid_run(pool, engine, job)

    job.refresh_from_db()
    assert (job.stage, job.outcome, job.attempt) == (Stage.RELEASE, Outcome.NODE_LOST, 1)
    assert "node n1 was lost" in job.reason
    [hold] = Hold.objects.filter(job=job)
    assert hold.node.name == "n1" and hold.held_at < job.started_at < hold.released_at == n1.last_heartbeat
    [record] = Record.objects.filter(job=job)
    assert record.hold_id == hold.pk and record.outcome == Outcome.NODE_LOST
    assert record.released_at == n1.last_heartbeat
    assert not Hold.objects.filter(node=n1, released_at__isnull=True).exists()
    # The killed run's container is still there: nobody was left on n1 to remove it.
    assert containers(engine, **{JOB_LABEL: str(job.pk)})

    restart_n1_and_check_it_cleans_up(pool, engine, job)

    # A run delivered again to the restarted node, for a released job, is ignored.
    offset = pool.logs["n1"].stat().st_size
    dispatch_run(job.pk, queue_for("n1"))
    wait_until(lambda: f"job {job.pk} is not held on node n1; ignoring" in pool.log_since("n1", offset), 20,
               message="n1 to ignore the second delivery")  # fmt: skip
    job.refresh_from_db()
    assert (job.stage, job.outcome, job.attempt) == (Stage.RELEASE, Outcome.NODE_LOST, 1)
    assert Hold.objects.filter(job=job).count() == Record.objects.filter(job=job).count() == 1
    assert containers(engine, **{JOB_LABEL: str(job.pk)}) == []


def test_a_job_with_a_retry_left_goes_back_to_the_queue_and_succeeds_on_the_other_node(pool, engine, member, team):
    set_state(Node.objects.get(name="n2"), Node.State.DRAINING, now=timezone.now())
    job = submit_with_retries(member, team, max_retries=1, command="sleep 3")

    job, n1 = lose_n1_mid_run(pool, engine, job)

    job = wait_for_release(job, 60)
    assert (job.outcome, job.attempt) == (Outcome.SUCCEEDED, 2), job.reason
    first, second = Hold.objects.filter(job=job).order_by("held_at").select_related("node")
    assert (first.node.name, first.attempt, first.released_at) == ("n1", 1, n1.last_heartbeat)
    assert (second.node.name, second.attempt) == ("n2", 2)
    assert [(r.node, r.outcome) for r in Record.objects.filter(job=job).order_by("sequence")] == [
        ("n1", Outcome.NODE_LOST),
        ("n2", Outcome.SUCCEEDED),
    ]
    assert_one_record_per_hold([job])

    restart_n1_and_check_it_cleans_up(pool, engine, job)


def test_a_restarted_node_queues_again_the_runs_of_the_jobs_held_on_it(pool, engine, member, team):
    set_state(Node.objects.get(name="n2"), Node.State.DRAINING, now=timezone.now())
    pool.stop("n1")
    job = submit_job(member, team, command="echo ran", name="held while n1 is down")
    # n1 is still active (not yet lost): the job is held there and its run waits in n1's queue.
    wait_until(lambda: Job.objects.filter(pk=job.pk, stage=Stage.RENT).exists(), 20, message="the job to be held")
    assert job.active_hold.node.name == "n1"
    # The run is lost with the worker (or the broker was down when it was dispatched).
    wait_until(lambda: purge(queue_for("n1")), 10, message="the run to be queued to n1")

    pool.start("n1")

    job = wait_for_release(job, 30)
    assert (job.outcome, job.attempt) == (Outcome.SUCCEEDED, 1), job.reason
    assert Hold.objects.filter(job=job).count() == Record.objects.filter(job=job).count() == 1
