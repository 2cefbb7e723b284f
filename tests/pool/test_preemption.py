"""Preemption as a pure function: which running jobs give their compute to a waiting job of a preempting
queue the pass could not place. No database: the nodes are never saved."""

import uuid
from datetime import UTC, datetime, timedelta

from pool.features import parse
from pool.models import Node
from pool.placement.backfill import place
from pool.placement.types import FreeCapacity, Request, Running, Waiting, Window
from pool.preemption import Preemption, choose

NOW = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)
URGENT, BATCH, SCAVENGER = 10, 0, -10


def node(pk: int, *, cpus: int = 4, memory_mb: int = 4096, features: tuple[str, ...] = ()) -> Node:
    return Node(pk=pk, name=f"n{pk}", cpu_ids=list(range(cpus)), memory_mb=memory_mb, features=list(features))


def waiting(*, cpus: int = 1, memory_mb: int = 64, priority: int = URGENT, preempts: bool = True,
            minutes: float = 10, constraint: str = "") -> Waiting:  # fmt: skip
    return Waiting(
        uuid.uuid4(), 1, NOW, 1, Request(cpus, memory_mb, 0), int(minutes * 60), priority=priority,
        preempts=preempts, constraint=parse(constraint),
    )  # fmt: skip


def running(on: Node, cores: list[int], *, priority: int = SCAVENGER, started: float = -10, memory_mb: int = 64,
            preemptable: bool = True) -> Running:  # fmt: skip
    """A job running on `on` since `started` minutes from now, for an hour at most."""
    return Running(
        on.pk, cores, memory_mb, [], NOW + timedelta(minutes=60), job_id=uuid.uuid4(), team_id=1,
        priority=priority, preemptable=preemptable, started_at=NOW + timedelta(minutes=started),
    )  # fmt: skip


def preemptions(queue: list[Waiting], nodes: list[Node], holds: list[Running], **options) -> list[Preemption]:
    """The pass as schedule_pass runs it: place(), then choose() for what it left."""
    free = {}
    for n in nodes:
        mine = [h for h in holds if h.node_id == n.pk]
        taken = {c for h in mine for c in h.cpu_ids}
        free[n.pk] = FreeCapacity(
            [c for c in n.cpu_ids if c not in taken], n.memory_mb - sum(h.memory_mb for h in mine), []
        )
    windows = options.get("windows")
    plan = place(queue, nodes, free, running=holds, now=NOW, limit=100, windows=windows)
    return choose(
        plan.left, nodes, free, placements=plan.placements, running=holds, now=NOW,
        stopping=options.get("stopping", {}), windows=windows, grace=options.get("grace", timedelta()),
    )  # fmt: skip


def test_an_urgent_job_with_no_room_preempts_a_lower_job():
    n1 = node(1, cpus=2)
    low = running(n1, [0, 1])
    urgent = waiting(cpus=2)
    assert preemptions([urgent], [n1], [low]) == [Preemption(urgent.job_id, n1, (low.job_id,))]


def test_a_job_that_can_be_placed_now_preempts_nobody():
    n1 = node(1, cpus=4)
    assert preemptions([waiting(cpus=2)], [n1], [running(n1, [0, 1])]) == []


def test_a_queue_that_does_not_preempt_waits():
    n1 = node(1, cpus=2)
    assert preemptions([waiting(cpus=2, preempts=False)], [n1], [running(n1, [0, 1])]) == []


def test_only_jobs_of_strictly_lower_priority_are_preempted():
    n1 = node(1, cpus=2)
    assert preemptions([waiting(cpus=2)], [n1], [running(n1, [0, 1], priority=URGENT)]) == []


def test_a_job_that_opted_out_is_never_preempted():
    n1 = node(1, cpus=2)
    assert preemptions([waiting(cpus=2)], [n1], [running(n1, [0, 1], preemptable=False)]) == []


def test_the_lowest_priority_goes_first_then_the_most_recently_started():
    n1 = node(1, cpus=3)
    batch = running(n1, [0], priority=BATCH, started=-1)
    old = running(n1, [1], started=-30)
    recent = running(n1, [2], started=-2)
    urgent = waiting(cpus=1)
    [chosen] = preemptions([urgent], [n1], [batch, old, recent])
    assert chosen.victims == (recent.job_id,)


def test_no_more_jobs_are_preempted_than_it_needs():
    n1 = node(1, cpus=4)
    small = running(n1, [0], started=-1)  # the first choice, but not enough alone
    big = running(n1, [1, 2, 3], started=-5)
    [chosen] = preemptions([waiting(cpus=3)], [n1], [small, big])
    assert chosen.victims == (big.job_id,)  # the small one is spared: the big one alone makes room


def test_what_is_free_on_the_node_counts_beside_the_victims():
    n1 = node(1, cpus=4)
    first = running(n1, [0], started=-1)
    second = running(n1, [1], started=-2)
    kept = running(n1, [2], started=-3, preemptable=False)
    # Core 3 is free: two more make room for three.
    [chosen] = preemptions([waiting(cpus=3)], [n1], [first, second, kept])
    assert chosen.victims == (first.job_id, second.job_id)


def test_victims_are_chosen_on_one_node():
    n1, n2 = node(1, cpus=2), node(2, cpus=2)
    holds = [running(n1, [0, 1]), running(n2, [0]), running(n2, [1], priority=URGENT)]
    # Two cores, one free job on each node: preempting one job of each would not do on a single node.
    [chosen] = preemptions([waiting(cpus=2)], [n1, n2], holds)
    assert (chosen.node, chosen.victims) == (n1, (holds[0].job_id,))


def test_between_nodes_the_most_recently_started_job_is_preempted():
    n1, n2 = node(1, cpus=1), node(2, cpus=1)
    hours_in = running(n1, [0], started=-300)
    just_started = running(n2, [0], started=-1)
    [chosen] = preemptions([waiting(cpus=1)], [n1, n2], [hours_in, just_started])
    assert (chosen.node, chosen.victims) == (n2, (just_started.job_id,))


def test_memory_counts_too():
    n1 = node(1, cpus=4, memory_mb=1000)
    light = running(n1, [0], memory_mb=100, started=-1)
    heavy = running(n1, [1], memory_mb=800, started=-5)
    [chosen] = preemptions([waiting(cpus=1, memory_mb=500)], [n1], [light, heavy])
    assert chosen.victims == (heavy.job_id,)


def test_a_node_without_the_feature_asked_for_is_not_preempted_on():
    plain, big = node(1, cpus=1), node(2, cpus=1, features=("bigmem",))
    holds = [running(plain, [0], started=-1), running(big, [0], started=-30)]
    [chosen] = preemptions([waiting(constraint="bigmem")], [plain, big], holds)
    assert (chosen.node, chosen.victims) == (big, (holds[1].job_id,))


def test_a_node_whose_maintenance_window_is_in_the_way_is_not_preempted_on():
    n1 = node(1, cpus=1)
    window = Window(NOW + timedelta(minutes=5), NOW + timedelta(hours=1), "kernel update")
    assert preemptions([waiting(minutes=10)], [n1], [running(n1, [0])], windows={1: [window]}) == []


def test_a_window_the_job_would_run_into_after_its_victims_grace_time_keeps_it_from_preempting():
    n1 = node(1, cpus=1)
    # It could run for its ten minutes from now, but it starts only once its victim has stopped.
    window = Window(NOW + timedelta(minutes=10, seconds=10), NOW + timedelta(hours=1), "kernel update")
    holds = [running(n1, [0])]
    chosen = preemptions([waiting(minutes=10)], [n1], holds, windows={1: [window]}, grace=timedelta(seconds=30))
    assert chosen == []


def test_a_job_asked_to_stop_is_not_chosen_again():
    n1 = node(1, cpus=2)
    first, second = running(n1, [0], started=-1), running(n1, [1], started=-2)
    other = waiting(cpus=1)
    [chosen] = preemptions([waiting(cpus=1)], [n1], [first, second], stopping={first.job_id: other.job_id})
    assert chosen.victims == (second.job_id,)


def test_a_job_waiting_for_its_victims_to_stop_asks_for_no_more():
    n1 = node(1, cpus=2)
    first, second = running(n1, [0]), running(n1, [1])
    urgent = waiting(cpus=1)
    assert preemptions([urgent], [n1], [first, second], stopping={first.job_id: urgent.job_id}) == []


def test_two_urgent_jobs_take_different_victims():
    n1 = node(1, cpus=2)
    first, second = running(n1, [0], started=-1), running(n1, [1], started=-2)
    a, b = waiting(cpus=1), waiting(cpus=1)
    chosen = preemptions([a, b], [n1], [first, second])
    assert [(p.job_id, p.victims) for p in chosen] == [(a.job_id, (first.job_id,)), (b.job_id, (second.job_id,))]


def test_no_preemption_when_even_every_lower_job_would_not_make_room():
    n1 = node(1, cpus=2)
    assert preemptions([waiting(cpus=2)], [n1], [running(n1, [0]), running(n1, [1], priority=URGENT)]) == []
