"""Placement with constraints: a job goes only to the nodes with the features it asks for, best fit among
them, reserved for on them only; when none taking work has them it says which feature, and when no
registered node has them the pass rejects it. Pure placement first (nodes never saved), then the pass."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Outcome, Stage
from pool.features import Constraint, parse
from pool.models import Node
from pool.nodes import Capacity, register, set_state
from pool.placement import reasons
from pool.placement.backfill import never_fits, place
from pool.placement.reasons import Reason, ShortOfScratch, WaitCode
from pool.placement.types import FreeCapacity, PlacementPlan, Request, Running, Waiting
from tests.factories import submit_job

NOW = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)


def node(pk: int, *features: str, cpus: int = 4, memory_mb: int = 4096, state: str = Node.State.ACTIVE) -> Node:
    return Node(pk=pk, name=f"n{pk}", cpu_ids=list(range(cpus)), memory_mb=memory_mb, gpu_ids=[],
                features=sorted(features), state=state)  # fmt: skip


def job(constraint: str = "", *, cpus: int = 1, minutes: float = 10) -> Waiting:
    return Waiting(uuid.uuid4(), 1, NOW, 1, Request(cpus, 64, 0), int(minutes * 60), constraint=parse(constraint))


def held(on: Node, cores: list[int], *, minutes: float) -> Running:
    return Running(on.pk, cores, 64, [], NOW + timedelta(minutes=minutes))


def plan(queue: list[Waiting], nodes: list[Node], running: list[Running] = ()) -> PlacementPlan:
    free = {}
    for n in nodes:
        taken = {c for h in running if h.node_id == n.pk for c in h.cpu_ids}
        used = sum(h.memory_mb for h in running if h.node_id == n.pk)
        free[n.pk] = FreeCapacity([c for c in n.cpu_ids if c not in taken], n.memory_mb - used, [])
    return place(queue, nodes, free, running=running, now=NOW, limit=100)


def placed(result: PlacementPlan) -> dict[uuid.UUID, str]:
    return {p.job_id: p.node.name for p in result.placements}


def reason_of(result: PlacementPlan, waiting: Waiting) -> Reason:
    [found] = [entry.reason for entry in result.left if entry.waiting == waiting]
    return found


# --- where a constrained job goes -------------------------------------------------------------------


def test_a_job_goes_only_to_a_node_with_its_features_though_another_fits_better():
    plain, bigmem = node(1, cpus=2), node(2, "bigmem", cpus=8)
    wants_bigmem = job("bigmem")

    assert placed(plan([wants_bigmem], [plain, bigmem])) == {wants_bigmem.job_id: "n2"}


def test_among_the_nodes_with_its_features_a_job_takes_the_best_fit():
    nodes = [node(1, cpus=1), node(2, "bigmem", "nvme", cpus=8), node(3, "bigmem", cpus=2), node(4, "nvme", cpus=2)]
    both, either = job("bigmem&nvme"), job("bigmem|nvme", cpus=2)

    assert placed(plan([both], nodes)) == {both.job_id: "n2"}
    assert placed(plan([either], nodes)) == {either.job_id: "n3"}  # n3 and n4 fit as well: the name decides


def test_a_job_asking_for_nothing_may_go_to_a_node_with_features():
    bigmem = node(1, "bigmem")
    anywhere = job()

    assert placed(plan([anywhere], [bigmem])) == {anywhere.job_id: "n1"}


def test_a_job_is_reserved_for_on_a_node_with_its_features_though_another_is_free_now():
    plain, bigmem = node(1), node(2, "bigmem", cpus=2)
    wants_bigmem = job("bigmem", cpus=2)

    result = plan([wants_bigmem], [plain, bigmem], [held(bigmem, [0, 1], minutes=20)])

    assert result.placements == []
    [reservation] = result.reservations
    assert (reservation.node.name, reservation.start) == ("n2", NOW + timedelta(minutes=20))
    assert reason_of(result, wants_bigmem).code == WaitCode.RESERVED


def test_a_smaller_job_behind_backfills_the_node_without_the_feature():
    plain, bigmem = node(1), node(2, "bigmem", cpus=2)
    wants_bigmem, small = job("bigmem", cpus=2), job(cpus=4)

    result = plan([wants_bigmem, small], [plain, bigmem], [held(bigmem, [0, 1], minutes=20)])

    assert placed(result) == {small.job_id: "n1"}


# --- why it waits -------------------------------------------------------------------------------------


def test_with_no_node_taking_work_having_the_feature_the_reason_names_it():
    """The only bigmem node is draining: the pass is given the nodes taking work, n1 alone."""
    wants_bigmem = job("bigmem")

    reason = reason_of(plan([wants_bigmem], [node(1, "nvme")]), wants_bigmem)

    assert reason == Reason(WaitCode.MISSING_FEATURE, detail="bigmem")
    assert reasons.reason_text(reason) == "no node taking work has the feature bigmem it asks for"


def test_the_missing_reason_names_what_no_node_taking_work_has_together():
    wants_both = job("bigmem&nvme")

    reason = reason_of(plan([wants_both], [node(1, "nvme"), node(2, "bigmem")]), wants_both)

    assert reasons.reason_text(reason) == "no node taking work has the features bigmem and nvme it asks for"


def test_with_the_nodes_having_the_feature_proving_the_reason_names_them():
    wants_bigmem = job("bigmem")

    reason = reason_of(plan([wants_bigmem], [node(1), node(2, "bigmem", state=Node.State.PROVING)]), wants_bigmem)

    assert reason == Reason(WaitCode.PROVING, node="n2")


def test_a_job_behind_another_on_the_only_node_with_its_features_is_reserved_there():
    plain, bigmem = node(1, cpus=8), node(2, "bigmem", cpus=4)
    wants_bigmem = job("bigmem", cpus=4)

    result = plan([job("bigmem", cpus=2, minutes=60), wants_bigmem], [plain, bigmem])

    assert reason_of(result, wants_bigmem).code == WaitCode.RESERVED
    assert result.reservations[0].node.name == "n2"


# --- never fits -----------------------------------------------------------------------------------


def test_a_constraint_no_registered_node_has_never_fits_naming_the_feature():
    reason = never_fits(Request(1, 64, 0), [node(1, "bigmem"), node(2)], parse("gpu-h100"))

    assert reason == Reason(WaitCode.NO_FEATURE, detail="gpu-h100")
    assert reasons.reason_text(reason) == "no node of the pool has the feature gpu-h100 it asks for"


def test_a_job_bigger_than_every_node_with_its_features_never_fits_though_another_is_bigger():
    reason = never_fits(Request(8, 64, 0), [node(1, "bigmem", cpus=4), node(2, cpus=16)], parse("bigmem"))

    assert reason is not None and reason.code == WaitCode.NEVER_FITS
    assert reason.numbers["largest_cpus"] == 4


def test_a_constraint_some_node_meets_fits():
    assert never_fits(Request(2, 64, 0), [node(1, "bigmem", cpus=4), node(2)], parse("bigmem")) is None
    assert never_fits(Request(2, 64, 0), [node(1)], Constraint.ANY) is None


# --- the pass ----------------------------------------------------------------------------------------


def registered(name: str, *features: str) -> Node:
    capacity = Capacity(cpu_ids=[0, 1], memory_mb=4096, gpu_ids=[])
    return register(name, capacity, now=timezone.now(), features=list(features))


def asking(member, team, constraint: str) -> Job:
    """A job asking for `constraint`, set on the row as submission stores it."""
    job = submit_job(member, team)
    Job.objects.filter(pk=job.pk).update(constraint=constraint)
    return job


@pytest.mark.django_db
def test_the_pass_holds_a_constrained_job_on_a_node_with_its_features(member, team):
    registered("n1")
    registered("n2", "bigmem")
    job = asking(member, team, "bigmem")

    [held_on] = schedule_pass(now=timezone.now())

    assert (held_on.job_id, held_on.node.name) == (job.pk, "n2")


@pytest.mark.django_db
def test_while_the_only_node_with_the_feature_drains_the_job_waits_naming_it(member, team):
    registered("n1")
    set_state(registered("n2", "bigmem"), Node.State.DRAINING, now=timezone.now(), reason="disk swap")
    job = asking(member, team, "bigmem")

    assert schedule_pass(now=timezone.now()) == []

    job.refresh_from_db()
    assert job.stage == Stage.SUBMIT
    assert job.wait_reason == "no node taking work has the feature bigmem it asks for"


@pytest.mark.django_db
def test_the_pass_rejects_a_job_whose_constraint_no_registered_node_has(member, team):
    registered("n1", "bigmem")
    job = asking(member, team, "gpu-h100")

    schedule_pass(now=timezone.now())

    job.refresh_from_db()
    assert (job.stage, job.outcome) == (Stage.RELEASE, Outcome.REJECTED)
    assert job.reason.startswith("can never be held: no node of the pool has the feature gpu-h100")


# --- scratch --------------------------------------------------------------------------------------


def test_with_the_node_having_the_feature_short_of_scratch_the_reason_says_so():
    """Not "no node taking work has bigmem": n2 has it and takes work, once it has scratch space again."""
    plain, bigmem = node(1), node(2, "bigmem")
    bigmem.scratch_free_mb, bigmem.scratch_min_free_mb = 100, 1024
    wants_bigmem = job("bigmem")

    reason = reason_of(plan([wants_bigmem], [plain, bigmem]), wants_bigmem)

    assert reason == Reason(WaitCode.SHORT_OF_SCRATCH, short_of_scratch=(ShortOfScratch("n2", 100, 1024),))
