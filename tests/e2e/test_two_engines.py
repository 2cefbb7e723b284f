"""Two nodes that share nothing but PostgreSQL, Redis and the S3 store: n1 on the main Docker engine,
n2 on a second `dockerd` of its own (tests/engines.py), each with its own scratch and var folders.

n2 joins mid-night and proves itself (its isolation probes, on its engine) before it takes a team's
job; jobs on both nodes stage their data from the store and return outputs to it; a drained node
whose worker is stopped finishes its runs first; n2's engine killed mid-job loses the job with an
honest reason, and n2 takes no job until its engine answers and its probes pass again.
"""

import dataclasses

import docker
import pytest
from django.conf import settings
from django.core.files.storage import default_storage
from django.utils import timezone

from accounting.models import Record
from e31site.celery import app
from isolation.models import ProbeRound, Verdict
from jobs.lifecycle import actions
from jobs.models import Job, Outcome, Stage
from jobs.storage.store import output_key
from jobs.submit.service import submit
from pool.models import Node, NodeStateChange, queue_for
from pool.nodes import ENGINE_SILENT, Capacity, detect_capacity, register, set_state
from tests.conftest import ROOT, STACK_NODE, wait_for_release, wait_until, worker_env
from tests.e2e.test_pool import purge
from tests.engines import Engine
from tests.factories import TeamFactory, declared, member_of
from tests.workers import NodeWorker, quiesce_all, resume_all
from worker.runtime_images import RECIPES
from worker.sandbox import ENGINE_GONE
from worker.sandbox.docker import JOB_LABEL, NODE_LABEL

pytestmark = [pytest.mark.docker, pytest.mark.celery, pytest.mark.xdist_group("two_engines")]

N1, N2 = "n1-own", "n2-own"
CORES = {N1: [0], N2: [0, 1]}  # n2 lends both cores: its probes run two at a time
NODE_MEMORY_MB = 2048
HEARTBEAT_S = 1
ROUND_S = 600  # the most a round of probes under both runtimes may take on this shared machine


@pytest.fixture(scope="session")
def engine2():
    """A second dockerd with the runtime images copied from the main engine (docker save | docker load)."""
    engine = Engine(ROOT / "var" / "log" / f"test-engine2-{settings.E31_SANDBOX_NAMESPACE}.log").start()
    try:
        engine.load_images([r.reference for r in RECIPES.values()], docker.from_env(timeout=600))
        yield engine
    finally:
        engine.remove()


def store_location() -> str:
    return f"{settings.E31_SANDBOX_NAMESPACE}/two-engines"


class Nodes:
    """n1 and n2's workers; n2's may be started again with other settings (E31_PROBE_ON_START)."""

    def __init__(self, env: dict[str, str], engine: Engine):
        self.env, self.engine = env, engine
        self.workers = {N1: self.worker(N1), N2: self.worker(N2, probe_on_start=False)}

    def worker(self, name: str, *, probe_on_start: bool = False) -> NodeWorker:
        own = settings.VAR_DIR / f"two-engines-{name}"
        env = {
            **self.env, "E31_NODE_CPUS": ",".join(map(str, CORES[name])), "E31_VAR_DIR": str(own / "var"),
            "E31_SCRATCH_DIR": str(own / "scratch"), "E31_PROBE_ON_START": "1" if probe_on_start else "0",
        }  # fmt: skip
        if name == N2:
            env["DOCKER_HOST"] = self.engine.host
        log_path = ROOT / "var" / "log" / f"test-celery-{settings.E31_SANDBOX_NAMESPACE}-{name}.log"
        return NodeWorker(name, env=env, log_path=log_path)

    def restart(self, name: str, *, probe_on_start: bool) -> NodeWorker:
        self.workers[name].stop()
        self.workers[name] = self.worker(name, probe_on_start=probe_on_start).start()
        return self.workers[name]


@pytest.fixture(scope="module")
def nodes(django_db_setup, django_db_blocker, built_images, engine2, s3_server, platform_plane):
    from django.db import connection

    env = worker_env(
        **s3_server.env(location=store_location()),
        E31_NODE_MEMORY_MB=str(NODE_MEMORY_MB), E31_HEARTBEAT_S=str(HEARTBEAT_S),
    )  # fmt: skip
    env.pop("DOCKER_HOST", None)
    env.pop("E31_STORE_DIR", None)
    pool = Nodes(env, engine2)
    for name in CORES:
        purge(queue_for(name))
    pool.workers[N1].start()
    try:
        yield pool
    finally:
        for worker in pool.workers.values():
            worker.stop()
        with django_db_blocker.unblock():
            Node.objects.filter(name__in=CORES, holds__isnull=True).delete()
            connection.close()


@pytest.fixture
def shared(transactional_db, nodes, images, settings, s3_server):
    """The test process on the nodes' store; the session worker's node draining, as in tests/e2e/test_pool.py."""
    settings.STORAGES = s3_server.storages(settings.STORAGES, location=store_location())
    now = timezone.now()
    set_state(register(STACK_NODE, detect_capacity(), now=now), Node.State.DRAINING, now=now)
    resume_all(app)
    yield nodes
    if not nodes.engine.answers():
        nodes.engine.start()
    both_registered(nodes)  # a run left on a stopped node ends only once its worker is back
    for job in Job.objects.exclude(stage=Stage.RELEASE):
        actions.cancel(job, now=timezone.now())
    wait_until(lambda: not Job.objects.exclude(stage=Stage.RELEASE).exists(), 120, message="every job to be released")
    quiesce_all(app)


def both_registered(nodes: Nodes) -> None:
    """n1 and n2 registered and active, n2's worker running on its own engine without a start-up round."""
    if not nodes.workers[N2].alive():
        nodes.workers[N2] = nodes.worker(N2).start()
    for name, cores in CORES.items():
        register(name, Capacity(cpu_ids=cores, memory_mb=NODE_MEMORY_MB, gpu_ids=[]), now=timezone.now())


def submit_pinned(user, team, node: Node | None, **request) -> Job:
    return submit(dataclasses.replace(declared(team, **request), pinned_node=node), user=user)[0]


def output_text(job: Job, path: str) -> str:
    with default_storage.open(output_key(job.pk, path), "rb") as f:
        return f.read().decode()


COPY = "cat /data/in.txt > /output/out.txt; echo ran"


def test_a_node_on_its_own_engine_proves_itself_then_takes_the_waiting_jobs(shared, engine2):
    nodes = shared
    register(N1, Capacity(cpu_ids=CORES[N1], memory_mb=NODE_MEMORY_MB, gpu_ids=[]), now=timezone.now())
    set_state(Node.objects.get(name=N1), Node.State.DRAINING, now=timezone.now())
    Node.objects.filter(name=N2).delete()
    team = TeamFactory(slug="far")
    member = member_of(team, "farah")
    waiting = submit_pinned(member, team, None, image="busybox", command=COPY, files={"in.txt": "night"}, outputs=["*"])
    waiting.refresh_from_db()
    assert waiting.stage == Stage.SUBMIT  # no node takes it: n1 drains, n2 has not joined

    nodes.restart(N2, probe_on_start=True)  # n2 joins mid-night, on its own engine
    n2 = wait_until(lambda: Node.objects.filter(name=N2).first(), 30, message="n2 to register")
    assert Node.objects.get(name=N2).state in (Node.State.PROVING, Node.State.ACTIVE)
    wait_for_release(waiting, timeout=ROUND_S)

    rounds = list(ProbeRound.objects.filter(node=n2))
    assert sorted(r.runtime for r in rounds) == sorted(engine2.client().info()["Runtimes"].keys() & {"runc", "runsc"})
    assert all(r.judged_at is not None for r in rounds)
    assert not [(r.probe, r.evidence) for r in rounds[0].results.all() if r.verdict == Verdict.FAILED]
    assert waiting.outcome == Outcome.SUCCEEDED, waiting.reason
    assert waiting.last_hold.node.name == N2
    assert waiting.held_at >= max(r.judged_at for r in rounds)  # it started only once n2 was proven
    assert output_text(waiting, "out.txt") == "night"
    moves = list(NodeStateChange.objects.filter(node=n2).order_by("at").values_list("from_state", "to_state", "by"))
    assert moves == [("offline", "proving", None), ("proving", "active", None)]

    # Both nodes now stage their job's data from the store and return its outputs to it.
    set_state(Node.objects.get(name=N1), Node.State.ACTIVE, now=timezone.now())
    jobs = {
        name: submit_pinned(
            member, team, Node.objects.get(name=name), image="busybox", command=COPY, files={"in.txt": f"on {name}"},
            outputs=["*"],
        )
        for name in CORES
    }  # fmt: skip
    for name, job in jobs.items():
        wait_for_release(job)
        assert job.outcome == Outcome.SUCCEEDED, job.reason
        assert job.last_hold.node.name == name
        assert output_text(job, "out.txt") == f"on {name}"
        assert Record.objects.filter(job=job).count() == 1


def test_a_drained_node_whose_worker_stops_finishes_its_runs_first(shared):
    nodes = shared
    both_registered(nodes)
    team = TeamFactory(slug="calm")
    member = member_of(team, "cal")
    n2 = Node.objects.get(name=N2)
    job = submit_pinned(member, team, n2, image="busybox", command="sleep 4; " + COPY, files={"in.txt": "kept"},
                        outputs=["*"])  # fmt: skip
    wait_until(lambda: Job.objects.get(pk=job.pk).stage == Stage.RUN, 60, 0.1, message="the job to run")
    set_state(n2, Node.State.DRAINING, now=timezone.now(), reason="its machine is going away")
    nodes.workers[N2].shut_down()  # SIGTERM to its main process: a warm shutdown waits for the run

    job.refresh_from_db()
    assert (job.stage, job.outcome) == (Stage.RELEASE, Outcome.SUCCEEDED), job.reason
    assert output_text(job, "out.txt") == "kept"
    assert Record.objects.filter(job=job).count() == 1


def test_a_node_whose_engine_dies_loses_its_run_and_takes_no_job_until_proven_again(shared, engine2):
    nodes = shared
    both_registered(nodes)
    team = TeamFactory(slug="lost")
    member = member_of(team, "lou")
    n2 = Node.objects.get(name=N2)
    running = submit_pinned(member, team, n2, image="busybox", command="sleep 120", time_limit_s=300)
    labels = {"label": [f"{JOB_LABEL}={running.pk}", f"{NODE_LABEL}={N2}"]}
    # Its container runs on n2's own engine, not on the main one.
    wait_until(lambda: engine2.client().api.containers(filters={**labels, "status": "running"}), 60, 0.1,
               message="the job's container to run on the second engine")  # fmt: skip
    assert not docker.from_env().api.containers(all=True, filters=labels)
    set_state(Node.objects.get(name=N1), Node.State.DRAINING, now=timezone.now())
    since = timezone.now()

    engine2.kill()
    wait_for_release(running, timeout=60)
    assert running.outcome == Outcome.NODE_LOST
    assert ENGINE_GONE in running.reason
    assert Record.objects.filter(job=running).count() == 1
    n2 = wait_until(
        lambda: Node.objects.filter(name=N2, state=Node.State.PROVING).first(), 30, message="n2 to be proving"
    )
    assert n2.state_reason == ENGINE_SILENT
    waiting = submit_pinned(member, team, None, image="busybox", command=COPY, files={"in.txt": "back"}, outputs=["*"])
    actions.schedule_pass(now=timezone.now())
    waiting.refresh_from_db()
    assert waiting.stage == Stage.SUBMIT  # n1 drains, and n2 proves itself first

    engine2.start()
    wait_for_release(waiting, timeout=ROUND_S)
    rounds = list(ProbeRound.objects.filter(node=n2, started_at__gte=since))
    assert rounds and all(r.judged_at is not None and r.trigger == "engine" for r in rounds)
    assert waiting.outcome == Outcome.SUCCEEDED, waiting.reason
    assert waiting.last_hold.node.name == N2
    assert waiting.held_at >= max(r.judged_at for r in rounds)
    assert output_text(waiting, "out.txt") == "back"
    moves = NodeStateChange.objects.filter(node=n2, at__gte=since).order_by("at").values_list("to_state", "reason")
    assert [to for to, _ in moves] == ["proving", "active"]
    assert list(moves)[0][1] == ENGINE_SILENT
