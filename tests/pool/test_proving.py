"""A proving node (pool.models.Node.State.PROVING): registered, it takes only the isolation probes pinned
to it until they pass (isolation.checks.prove); an engine that does not answer sends an active node back."""

import logging
from datetime import timedelta

import docker
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from isolation import checks
from isolation.models import ProbeRound, Verdict
from jobs.models import Job, Outcome, RuntimeImage, Stage
from pool.models import Node, NodeStateChange
from pool.nodes import ENGINE_SILENT, PROBES_FIRST, Capacity, NodeProving, engine_silent, proven, register, set_state
from pool.placement.reasons import WaitCode, reason_text
from pool.scheduler import lock_pool
from tests.pool.test_placement import job, node, pinned, placed, plan
from worker import node as worker_node
from worker.sandbox import EngineGone
from worker.sandbox.docker import API_VERSION, DockerSandbox

CAPACITY = Capacity(cpu_ids=[0, 1], memory_mb=2048, gpu_ids=[])


def proving(n: Node) -> Node:
    n.state = Node.State.PROVING
    return n


def test_a_proving_node_takes_only_the_jobs_pinned_to_it():
    new, busy = proving(node(1, cpus=4)), node(2, cpus=1)
    probe, team_job, other = pinned(new), job(), job()

    result = plan([team_job, probe, other], [new, busy], [])

    assert placed(result) == {probe.job_id: ("n1", [0]), team_job.job_id: ("n2", [0])}
    assert other.job_id not in placed(result)
    assert all(r.node.name != "n1" for r in result.reservations)  # nor is it reserved for a team's job


def test_the_pass_takes_proving_nodes_with_the_active_ones(db):
    now = timezone.now()
    register("a", CAPACITY, now=now)
    register("p", CAPACITY, now=now, proving=True)
    set_state(register("d", CAPACITY, now=now), Node.State.DRAINING, now=now)
    assert [n.name for n in lock_pool()] == ["a", "p"]


def test_a_node_registered_to_prove_itself_says_so_in_its_history(db):
    now = timezone.now()
    node = register("new", CAPACITY, now=now, proving=True)
    assert (node.state, node.state_reason) == (Node.State.PROVING, f"registered: {PROBES_FIRST}")
    change = NodeStateChange.objects.get(node=node)
    assert (change.from_state, change.to_state, change.by) == ("offline", "proving", None)


def test_an_active_node_registered_again_to_prove_itself_proves_itself_and_a_draining_one_stays(db):
    now = timezone.now()
    register("a", CAPACITY, now=now)
    set_state(register("d", CAPACITY, now=now), Node.State.DRAINING, now=now)
    assert register("a", CAPACITY, now=now, proving=True).state == Node.State.PROVING
    assert register("d", CAPACITY, now=now, proving=True).state == Node.State.DRAINING


def test_an_engine_that_does_not_answer_sends_an_active_node_proving_once(db):
    now = timezone.now()
    node = register("a", CAPACITY, now=now)
    assert engine_silent("a", now=now)
    assert not engine_silent("a", now=now)
    node.refresh_from_db()
    assert (node.state, node.state_reason, node.state_changed_by) == (Node.State.PROVING, ENGINE_SILENT, None)
    assert NodeStateChange.objects.filter(node=node, to_state="proving").count() == 1
    set_state(node, Node.State.DRAINING, now=now)
    assert not engine_silent("a", now=now)  # the operator's drain stands


def test_a_proven_node_becomes_active_once(db):
    now = timezone.now()
    node = register("p", CAPACITY, now=now, proving=True)
    assert proven(node, now=now, reason="its isolation probes passed under runc")
    assert not proven(node, now=now, reason="again")
    node.refresh_from_db()
    assert (node.state, node.state_reason) == (Node.State.ACTIVE, "its isolation probes passed under runc")


# --- prove: the rounds of a proving node ----------------------------------------------------------------


@pytest.fixture
def python_image(db):
    return RuntimeImage.objects.create(name="python", reference="e31/python:3", description="python")


def ended(round: ProbeRound, *, outcome: str = Outcome.SUCCEEDED, verdict: str = Verdict.PASSED) -> ProbeRound:
    """The round's jobs released with `outcome`, and it judged with every probe given `verdict`."""
    ids = [r.job_id for r in round.results.all()] + ([round.decoy_id] if round.decoy_id else [])
    Job.objects.filter(pk__in=ids).update(stage=Stage.RELEASE, outcome=outcome)
    round.results.update(verdict=verdict)
    round.judged_at = timezone.now()
    round.save(update_fields=["judged_at"])
    return round


def test_a_proving_node_gets_a_round_under_each_runtime_its_engine_has(python_image):
    node = register("p", CAPACITY, now=timezone.now(), proving=True)
    started = checks.prove(node, now=timezone.now(), engine_runtimes={"runc", "io.containerd.runc.v2"})
    assert [r.runtime for r in started] == ["runc"]
    assert checks.prove(node, now=timezone.now(), engine_runtimes={"runc"}) == []  # it runs meanwhile
    node.refresh_from_db()
    assert node.state == Node.State.PROVING


def test_a_node_whose_rounds_passed_becomes_active(python_image):
    node = register("p", CAPACITY, now=timezone.now(), proving=True)
    [round] = checks.prove(node, now=timezone.now(), engine_runtimes={"runc"})
    ended(round)
    assert checks.prove(node, now=timezone.now(), engine_runtimes={"runc"}) == []
    node.refresh_from_db()
    assert (node.state, node.state_reason) == (Node.State.ACTIVE, "its isolation probes passed under runc")
    assert NodeStateChange.objects.filter(node=node).latest("at").by is None


def test_a_round_whose_probes_did_not_run_is_run_again(python_image):
    node = register("p", CAPACITY, now=timezone.now(), proving=True)
    [round] = checks.prove(node, now=timezone.now(), engine_runtimes={"runc"})
    ended(round, outcome=Outcome.NODE_LOST, verdict=Verdict.INCONCLUSIVE)  # its engine went away again
    assert checks.prove(node, now=timezone.now(), engine_runtimes={"runc"}) == []  # not at every heartbeat
    later = timezone.now() + checks.ROUND_AGAIN_AFTER
    [again] = checks.prove(node, now=later, engine_runtimes={"runc"})
    assert again.pk != round.pk and again.trigger == "engine"
    node.refresh_from_db()
    assert node.state == Node.State.PROVING


def test_rounds_from_before_the_node_went_proving_do_not_count(python_image):
    node = register("a", CAPACITY, now=timezone.now() - timedelta(minutes=5))
    old = checks.start_round(node, "runc", now=timezone.now() - timedelta(minutes=1), trigger="daily")
    ended(old)
    engine_silent("a", now=timezone.now())
    node.refresh_from_db()
    [fresh] = checks.prove(node, now=timezone.now(), engine_runtimes={"runc"})
    assert fresh.pk != old.pk


IMAGE_MISSING = "its isolation probes need the runtime image python, which is not registered"


def test_a_node_whose_probe_image_is_missing_says_so_and_proves_once_it_is_registered(db):
    node = register("p", CAPACITY, now=timezone.now(), proving=True)

    assert checks.prove(node, now=timezone.now(), engine_runtimes={"runc"}) == []
    assert checks.prove(node, now=timezone.now(), engine_runtimes={"runc"}) == []

    node.refresh_from_db()
    assert (node.state, node.state_reason) == (Node.State.PROVING, IMAGE_MISSING)
    assert not ProbeRound.objects.exists()
    assert list(NodeStateChange.objects.values_list("to_state", flat=True)) == ["proving"]  # no change of state
    RuntimeImage.objects.create(name="python", reference="e31/python:3", description="python")
    [round] = checks.prove(node, now=timezone.now(), engine_runtimes={"runc"})
    node.refresh_from_db()
    assert (node.state, node.state_reason) == (Node.State.PROVING, f"registered: {PROBES_FIRST}")
    ended(round)
    checks.prove(node, now=timezone.now(), engine_runtimes={"runc"})
    node.refresh_from_db()
    assert (node.state, node.state_reason) == (Node.State.ACTIVE, "its isolation probes passed under runc")


def test_a_worker_starting_without_the_probe_image_says_so_without_a_traceback(db, caplog):
    register("p", CAPACITY, now=timezone.now(), proving=True)

    assert checks.probe_node_on_start("p", engine_runtimes={"runc"}) == []

    assert Node.objects.get(name="p").state_reason == IMAGE_MISSING
    [said] = [r for r in caplog.records if r.name == "isolation.checks"]
    assert said.getMessage() == f"node p: {IMAGE_MISSING} (manage.py build_runtime_images builds it)"
    assert said.exc_info is None


def test_the_isolation_check_command_names_the_missing_image(db):
    register("a", CAPACITY, now=timezone.now())

    with pytest.raises(CommandError, match="need the runtime image python, which is not registered"):
        call_command("isolation_check", "--node", "a")
    assert not ProbeRound.objects.exists()


# --- the engine's check, each heartbeat ----------------------------------------------------------------


class SilentEngine:
    def answers(self, timeout: float) -> bool:
        return False


class AnsweringEngine:
    def answers(self, timeout: float) -> bool:
        return True

    def runtimes(self) -> set[str]:
        return {"runc"}

    def orphans(self, *, node: str, keep: set[str]) -> list[str]:
        return []


def test_heartbeats_without_the_probe_image_say_so_once_then_prove_once_it_is_registered(db, monkeypatch, caplog):
    monkeypatch.setattr(worker_node, "get_sandbox", AnsweringEngine)
    node = register("p", CAPACITY, now=timezone.now(), proving=True)

    for _ in range(3):
        worker_node.look_after_engine(node)

    node.refresh_from_db()
    assert (node.state, node.state_reason) == (Node.State.PROVING, IMAGE_MISSING)
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in said] == [f"node p: {IMAGE_MISSING} (manage.py build_runtime_images builds it)"]
    assert said[0].exc_info is None
    RuntimeImage.objects.create(name="python", reference="e31/python:3", description="python")
    worker_node.look_after_engine(node)
    [round] = ProbeRound.objects.filter(node=node)
    assert (round.runtime, round.trigger) == ("runc", "engine")
    node.refresh_from_db()
    assert node.state_reason == f"registered: {PROBES_FIRST}"


def test_a_heartbeat_that_finds_the_engine_silent_sends_the_node_proving(db, monkeypatch):
    monkeypatch.setattr(worker_node, "get_sandbox", SilentEngine)
    node = register("a", CAPACITY, now=timezone.now())
    worker_node.look_after_engine(node)
    node.refresh_from_db()
    assert (node.state, node.state_reason) == (Node.State.PROVING, ENGINE_SILENT)


def test_a_sandbox_on_an_engine_that_is_gone_says_so(settings, tmp_path):
    settings.E31_CGROUP_ROOT = tmp_path
    sandbox = DockerSandbox(
        docker.DockerClient(base_url=f"unix://{tmp_path}/gone.sock", timeout=2, version=API_VERSION)
    )
    assert not sandbox.answers(1)
    with pytest.raises(EngineGone):
        sandbox.wait("any", timeout=0.1)
    with pytest.raises(EngineGone):
        sandbox.runtimes()
    sandbox.stop("any")  # the caller kills the run through its cgroup instead
    sandbox.remove("any")
    assert sandbox.kill_run("job-1") == 0


def test_a_team_job_waiting_only_for_proving_nodes_says_so():
    new = proving(node(1, cpus=4))
    team_job = job()

    result = plan([team_job], [new], [])

    [left] = result.left
    assert left.waiting == team_job and left.reason.code == WaitCode.PROVING and left.reason.node == "n1"
    assert reason_text(left.reason) == "no node takes a team's job yet: n1 must pass its isolation probes first"


def test_an_operator_cannot_resume_a_proving_node_past_its_probes(db, operator):
    n = register("p", CAPACITY, now=timezone.now(), proving=True)

    with pytest.raises(NodeProving, match="proving its isolation"):
        set_state(n, Node.State.ACTIVE, now=timezone.now(), acting_user=operator)
    set_state(n, Node.State.DRAINING, now=timezone.now(), acting_user=operator, reason="disk")
    set_state(n, Node.State.ACTIVE, now=timezone.now(), acting_user=operator, reason="disk replaced")

    n.refresh_from_db()
    assert n.state == Node.State.PROVING and n.state_reason == f"disk replaced: {PROBES_FIRST}"


def test_the_api_answers_409_to_resuming_a_proving_node(db, operator_api):
    register("p", CAPACITY, now=timezone.now(), proving=True)

    answer = operator_api.post("/api/v1/pool/nodes/p/resume/", {"reason": "trust me"}, format="json")

    assert answer.status_code == 409 and "proving its isolation" in str(answer.json())
    assert Node.objects.get(name="p").state == Node.State.PROVING
