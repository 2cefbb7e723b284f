"""Placement as a pure function: backfill with reservations, from the queue, the nodes, their free
capacity and when the running holds end. No database: the nodes are never saved."""

import uuid
from datetime import UTC, datetime, timedelta

from pool.models import Node
from pool.placement.backfill import RESERVATIONS, place
from pool.placement.reasons import Reason, ShortOfScratch, WaitCode
from pool.placement.types import FreeCapacity, PlacementPlan, Request, Running, Waiting

NOW = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)


def node(pk: int, *, cpus: int = 4, memory_mb: int = 4096, gpus: tuple[str, ...] = ()) -> Node:
    return Node(pk=pk, name=f"n{pk}", cpu_ids=list(range(cpus)), memory_mb=memory_mb, gpu_ids=list(gpus))


def job(*, cpus: int = 1, memory_mb: int = 64, gpus: int = 0, minutes: float = 10) -> Waiting:
    return Waiting(uuid.uuid4(), 1, NOW, 1, Request(cpus, memory_mb, gpus), int(minutes * 60))


def held(on: Node, cores: list[int], *, minutes: float, memory_mb: int = 64, gpus: tuple[str, ...] = ()) -> Running:
    """A running hold on `on` that ends at the latest `minutes` from now."""
    return Running(on.pk, cores, memory_mb, list(gpus), NOW + timedelta(minutes=minutes))


def plan(queue: list[Waiting], nodes: list[Node], running: list[Running], **options) -> PlacementPlan:
    """place() with the free capacity the running holds leave, as the scheduler passes it."""
    free = {}
    for n in nodes:
        mine = [h for h in running if h.node_id == n.pk]
        taken = {c for h in mine for c in h.cpu_ids}
        gpus = {g for h in mine for g in h.gpu_ids}
        free[n.pk] = FreeCapacity(
            [c for c in n.cpu_ids if c not in taken],
            n.memory_mb - sum(h.memory_mb for h in mine),
            [g for g in n.gpu_ids if g not in gpus],
        )
    return place(queue, nodes, free, running=running, now=NOW, limit=options.pop("limit", 100), **options)


def placed(result: PlacementPlan) -> dict[uuid.UUID, tuple[str, list[int]]]:
    return {p.job_id: (p.node.name, p.cpu_set) for p in result.placements}


def left(result: PlacementPlan, waiting: Waiting):
    [found] = [entry for entry in result.left if entry.waiting == waiting]
    return found


def at(minutes: float) -> datetime:
    return NOW + timedelta(minutes=minutes)


def reserved(on: str, start: datetime, *, cpus: int = 0, memory_mb: int = 0, gpus: int = 0) -> Reason:
    """The reason of a job reserved on `on` from `start`, once the node frees what is named."""
    return Reason(WaitCode.RESERVED, {"cpus": cpus, "memory_mb": memory_mb, "gpus": gpus}, node=on, start=start)


def needs(code: WaitCode, amount: int, *, largest_free: int, ahead: int = 0, **more) -> Reason:
    return Reason(code, {"needs": amount, "largest_free": largest_free}, ahead=ahead, **more)


# --- the starvation scenario ----------------------------------------------------------------------


def test_a_job_that_does_not_fit_yet_gets_a_reservation_when_its_cores_free_up():
    n1 = node(1, cpus=2)
    big = job(cpus=2)

    result = plan([big], [n1], [held(n1, [1], minutes=20)])

    assert result.placements == []
    [reservation] = result.reservations
    assert (reservation.job_id, reservation.node, reservation.start) == (big.job_id, n1, at(20))
    assert reservation.cpu_ids == {0, 1}
    assert left(result, big).expected_start == at(20)
    assert left(result, big).reason == reserved("n1", at(20), cpus=1)


def test_a_job_that_would_still_run_when_the_reservation_starts_waits():
    n1 = node(1, cpus=2)
    big, long = job(cpus=2), job(cpus=1, minutes=30)

    result = plan([big, long], [n1], [held(n1, [1], minutes=20)])

    assert placed(result) == {}  # core 0 is free, but the big job needs it at 22:20
    assert left(result, long).expected_start == at(30)  # its own reservation: once the big job's time is up
    one = plan([big, long], [n1], [held(n1, [1], minutes=20)], reservations=1)
    assert placed(one) == {}
    assert left(one, long).reason == Reason(WaitCode.BEHIND_RESERVATION, ahead=1)
    assert left(one, long).expected_start is None


def test_a_job_that_ends_before_the_reservation_starts_backfills():
    n1 = node(1, cpus=2)
    big, short, just_in_time = job(cpus=2), job(cpus=1, minutes=5), job(cpus=1, minutes=20)

    assert placed(plan([big, short], [n1], [held(n1, [1], minutes=20)])) == {short.job_id: ("n1", [0])}
    # Ending exactly when the reservation starts delays nothing.
    assert placed(plan([big, just_in_time], [n1], [held(n1, [1], minutes=20)])) == {just_in_time.job_id: ("n1", [0])}


def test_without_a_time_limit_ending_first_nothing_takes_the_reserved_cores_however_long_the_stream():
    n1 = node(1, cpus=2)
    big = job(cpus=2)
    stream = [job(cpus=1, minutes=60) for _ in range(20)]

    result = plan([big, *stream], [n1], [held(n1, [1], minutes=20)])

    assert result.placements == []
    assert [entry.waiting for entry in result.left] == [big, *stream]


# --- what a reservation does not need ------------------------------------------------------------


def test_a_job_using_only_cores_the_reservation_does_not_need_backfills():
    n1 = node(1, cpus=4)
    big = job(cpus=3)
    first, second = job(cpus=1, minutes=600), job(cpus=1, minutes=600)

    result = plan([big, first, second], [n1], [held(n1, [0, 1], minutes=10)])

    assert result.reservations[0].cpu_ids == {0, 1, 3}  # the held cores first, then the highest free one
    assert placed(result) == {first.job_id: ("n1", [2])}
    assert second.job_id not in placed(result)  # core 3 is the big job's from 22:10


def test_a_job_on_another_node_is_not_held_back_by_a_reservation():
    n1, n2 = node(1, cpus=2), node(2, cpus=2)
    big = job(cpus=2)
    long = job(cpus=1, minutes=600)

    result = plan([big, long], [n1, n2], [held(n1, [1], minutes=20), held(n2, [0, 1], minutes=30)])

    assert result.reservations[0].node == n1
    assert placed(result) == {}  # n1's free core is reserved, n2 has none
    result = plan([big, long], [n1, n2], [held(n1, [1], minutes=20), held(n2, [1], minutes=30)])
    assert placed(result) == {long.job_id: ("n2", [0])}


def test_memory_the_reservation_needs_is_held_back_and_the_rest_is_not():
    n1 = node(1, cpus=4, memory_mb=4096)
    hungry = job(cpus=1, memory_mb=3072)  # 2048 MB free now, 4096 once the hold ends
    spare = job(cpus=1, memory_mb=1024, minutes=600)  # 4096 - 3072 = 1024 MB the reservation does not need
    over = job(cpus=1, memory_mb=1024, minutes=600)
    short = job(cpus=1, memory_mb=1024, minutes=5)

    result = plan([hungry, spare, over, short], [n1], [held(n1, [0], minutes=10, memory_mb=2048)])

    assert left(result, hungry).reason == reserved("n1", at(10), memory_mb=1024)
    assert set(placed(result)) == {spare.job_id, short.job_id}
    assert left(result, over).expected_start == at(20)  # once the hungry job's ten minutes are up


def test_gpus_the_reservation_needs_are_held_back_and_cores_it_does_not_need_are_not():
    n1 = node(1, cpus=4, gpus=("GPU-a", "GPU-b"))
    two_gpus = job(cpus=1, gpus=2)
    one_gpu_long, one_gpu_short = job(cpus=1, gpus=1, minutes=600), job(cpus=1, gpus=1, minutes=5)
    no_gpu_long = job(cpus=1, minutes=600)

    result = plan(
        [two_gpus, one_gpu_long, one_gpu_short, no_gpu_long], [n1], [held(n1, [0], minutes=10, gpus=("GPU-a",))]
    )

    reservation = result.reservations[0]
    assert (reservation.job_id, reservation.gpu_ids, reservation.start) == (two_gpus.job_id, {"GPU-a", "GPU-b"}, at(10))
    assert left(result, two_gpus).reason == reserved("n1", at(10), gpus=1)
    assert {p.job_id: p.gpu_ids for p in result.placements} == {one_gpu_short.job_id: ["GPU-b"], no_gpu_long.job_id: []}
    assert one_gpu_long.job_id not in placed(result)


# --- several reservations, several nodes -----------------------------------------------------------


def test_the_reservation_goes_to_the_node_that_frees_up_first():
    n1, n2, n3 = node(1), node(2), node(3, cpus=2)
    first, second = job(cpus=4, minutes=60), job(cpus=4, minutes=60)

    result = plan(
        [first, second], [n1, n2, n3], [held(n1, [0, 1, 2, 3], minutes=30), held(n2, [0, 1, 2, 3], minutes=10)]
    )

    assert [(r.job_id, r.node.name, r.start) for r in result.reservations] == [
        (first.job_id, "n2", at(10)),
        (second.job_id, "n1", at(30)),  # n2 is reserved from 22:10 to 23:10; n1 frees up first after that
    ]
    assert [left(result, j).expected_start for j in (first, second)] == [at(10), at(30)]


def test_each_reservation_narrows_what_later_jobs_may_backfill_into():
    n1 = node(1, cpus=4)
    a, b = job(cpus=2), job(cpus=2)
    long = job(cpus=1, minutes=600)
    running = [held(n1, [0, 1, 2], minutes=10)]

    only_first = plan([a, b, long], [n1], running, reservations=1)
    both = plan([a, b, long], [n1], running, reservations=2)

    assert placed(only_first) == {long.job_id: ("n1", [3])}  # only a's cores {0, 1} are reserved
    assert [r.cpu_ids for r in both.reservations] == [{0, 1}, {2, 3}]
    assert placed(both) == {}


def test_a_reservation_after_another_on_the_same_cores_starts_when_that_one_ends():
    n1 = node(1, cpus=2)
    a, b = job(cpus=2, minutes=30), job(cpus=2, minutes=30)

    result = plan([a, b], [n1], [held(n1, [0, 1], minutes=10)])

    assert [r.start for r in result.reservations] == [at(10), at(40)]
    assert left(result, b).reason == Reason(WaitCode.RESERVED_AFTER, node="n1", start=at(40))


def test_a_pass_reserves_for_the_first_blocked_jobs_only():
    n1 = node(1, cpus=1)
    queue = [job(cpus=1, minutes=10) for _ in range(RESERVATIONS + 2)]

    result = plan(queue, [n1], [held(n1, [0], minutes=10)])

    assert [r.job_id for r in result.reservations] == [w.job_id for w in queue[:RESERVATIONS]]
    assert [entry.expected_start for entry in result.left] == [at(10 * (i + 1)) for i in range(RESERVATIONS)] + [
        None,
        None,
    ]
    assert result.left[-1].reason == needs(WaitCode.NEEDS_CORES, 1, largest_free=0, ahead=RESERVATIONS + 1)


def test_jobs_placed_earlier_in_the_pass_count_as_holds_ending_with_their_time_limit():
    n1 = node(1, cpus=2)
    first, big = job(cpus=1, minutes=10), job(cpus=2)
    long, short = job(cpus=1, minutes=30), job(cpus=1, minutes=5)

    result = plan([first, big, long, short], [n1], [])

    assert placed(result) == {first.job_id: ("n1", [0]), short.job_id: ("n1", [1])}
    assert left(result, big).expected_start == at(10)


def test_a_hold_past_its_time_limit_counts_as_ending_now():
    n1 = node(1, cpus=2)
    big, quick = job(cpus=2), job(cpus=1, minutes=1)

    result = plan([big, quick], [n1], [held(n1, [1], minutes=-5)])  # its job is being stopped

    assert left(result, big).expected_start == NOW
    assert placed(result) == {}  # even a one-minute job would delay it


def test_nothing_is_reserved_where_the_job_could_never_fit():
    # Only the active nodes are passed in: a job only a draining node could hold waits, unreserved.
    n1 = node(1, cpus=2)
    big, long = job(cpus=4), job(cpus=1, minutes=600)

    result = plan([big, long], [n1], [held(n1, [0], minutes=10)])

    assert result.reservations == []
    assert placed(result) == {long.job_id: ("n1", [1])}
    assert left(result, big).reason == needs(WaitCode.NEEDS_CORES, 4, largest_free=0)
    assert left(result, big).expected_start is None


def test_a_job_that_fits_is_placed_without_looking_at_reservations():
    n1 = node(1, cpus=4)
    big, small = job(cpus=4), job(cpus=1, minutes=600)

    result = plan([big, small], [n1], [])

    assert placed(result) == {big.job_id: ("n1", [0, 1, 2, 3])}
    assert result.reservations[0].job_id == small.job_id  # now it is the one blocked


# --- the reason -----------------------------------------------------------------------------------


def test_the_reason_of_a_reservation_keeps_its_start_to_the_second():
    n1 = node(1, cpus=2)
    big = job(cpus=2)

    result = plan([big], [n1], [held(n1, [0, 1], minutes=3 * 60 + 0.5)])  # 01:00:30 tomorrow

    assert left(result, big).reason == reserved("n1", NOW + timedelta(hours=3, seconds=30), cpus=2)


def test_placement_reads_no_time_zone(settings):
    n1 = node(1, cpus=2)
    queue = [job(cpus=2), job(cpus=1)]
    running = [held(n1, [0, 1], minutes=30)]
    in_utc = plan(queue, [n1], running)

    settings.TIME_ZONE = "Asia/Tokyo"

    assert plan(queue, [n1], running) == in_utc


def test_without_reservations_the_shortfall_is_the_reason():
    n1, n2 = node(1, cpus=6, memory_mb=8192), node(2, cpus=8, memory_mb=8192)
    running = [held(n1, [0, 1, 2, 3], minutes=10, memory_mb=1024), held(n2, [0, 1, 2, 3], minutes=10, memory_mb=1024)]
    wide, deep = job(cpus=8), job(cpus=1, memory_mb=8000)

    result = plan([wide, deep], [n1, n2], running, reservations=0)

    assert left(result, wide).reason == needs(WaitCode.NEEDS_CORES, 8, largest_free=4)
    assert left(result, deep).reason == needs(WaitCode.NEEDS_MEMORY, 8000, largest_free=7168, ahead=1)
    assert [entry.expected_start for entry in result.left] == [None, None]


def test_placement_changes_nothing_it_is_given():
    n1 = node(1, cpus=2)
    running = [held(n1, [1], minutes=20)]
    free = {n1.pk: FreeCapacity([0], 4096 - 64, [])}
    queue = [job(cpus=2), job(cpus=1, minutes=5)]

    place(queue, [n1], free, running=running, now=NOW, limit=10)

    assert free == {n1.pk: FreeCapacity([0], 4096 - 64, [])}
    assert running == [held(n1, [1], minutes=20)]


# --- a job pinned to one node (the isolation probes) ---------------------------------------------------


def pinned(on: Node, **request) -> Waiting:
    plain = job(**request)
    return Waiting(plain.job_id, 1, NOW, 1, plain.request, plain.time_limit_s, on.pk)


def test_a_pinned_job_goes_only_on_its_node_even_where_another_fits_better():
    big, small = node(1, cpus=8), node(2, cpus=1)
    probe = pinned(big)

    result = plan([probe], [big, small], [])

    assert [(p.job_id, p.node.name) for p in result.placements] == [(probe.job_id, "n1")]


def test_a_pinned_job_whose_node_is_full_waits_and_does_not_block_the_same_shape_elsewhere():
    full, free = node(1, cpus=1), node(2, cpus=1)
    probe, other = pinned(full), job()

    result = plan([probe, other], [full, free], [held(full, [0], minutes=5)])

    assert [(p.job_id, p.node.name) for p in result.placements] == [(other.job_id, "n2")]
    (left,) = result.left
    assert left.waiting is probe and left.expected_start == NOW + timedelta(minutes=5)


# --- the scratch space a node keeps free ------------------------------------------------------------


def short_of_scratch(n: Node, *, free_mb: int = 800, keeps_mb: int = 1024) -> Node:
    n.scratch_free_mb, n.scratch_min_free_mb = free_mb, keeps_mb
    return n


def test_a_node_below_its_scratch_floor_takes_no_job_and_the_job_waits_saying_why():
    n1 = short_of_scratch(node(1))
    waiting = job()

    result = plan([waiting], [n1], [])

    assert result.placements == [] and result.reservations == []
    assert left(result, waiting).reason == Reason(
        WaitCode.SHORT_OF_SCRATCH, short_of_scratch=(ShortOfScratch("n1", 800, 1024),)
    )


def test_a_job_goes_to_a_node_with_scratch_space_to_spare_rather_than_one_short_of_it():
    n1, n2 = short_of_scratch(node(1, cpus=1)), node(2, cpus=8)  # n1 would be the best fit
    waiting = job()

    assert placed(plan([waiting], [n1, n2], [])) == {waiting.job_id: ("n2", [0])}


def test_a_node_exactly_at_its_floor_or_that_never_reported_takes_jobs():
    at_floor, unreported = short_of_scratch(node(1, cpus=1), free_mb=1024), node(2, cpus=1)
    first, second = job(), job()

    assert set(placed(plan([first, second], [at_floor, unreported], []))) == {first.job_id, second.job_id}


def test_a_job_that_fits_nowhere_else_says_which_node_is_short_of_scratch():
    n1, n2 = short_of_scratch(node(1, cpus=8)), node(2, cpus=2)
    big = job(cpus=4)

    result = plan([big], [n1, n2], [], reservations=0)

    short = (ShortOfScratch("n1", 800, 1024),)
    assert left(result, big).reason == needs(WaitCode.NEEDS_CORES, 4, largest_free=2, short_of_scratch=short)
