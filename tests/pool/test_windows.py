"""Maintenance windows: no job is held where its time limit would run into one; it waits, naming the window,
to start after it. At a window's start its nodes drain, at its end they resume by themselves."""

from datetime import UTC, datetime, timedelta

import pytest

from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Stage
from pool.models import MaintenanceWindow, Node, NodeStateChange
from pool.nodes import Capacity, register, set_state
from pool.windows import _resume, drain_reason, turn, upcoming
from tests.factories import submit_job

T0 = datetime(2026, 3, 7, 20, 0, tzinfo=UTC)

pytestmark = pytest.mark.django_db


def add_node(name: str, *, cpus: int = 2, proving: bool = False) -> Node:
    return register(name, Capacity(cpu_ids=list(range(cpus)), memory_mb=4096, gpu_ids=[]), now=T0, proving=proving)


def hours(n: float) -> datetime:
    return T0 + timedelta(hours=n)


def window(start: datetime, end: datetime, *nodes: Node, reason: str = "kernel upgrade") -> MaintenanceWindow:
    made = MaintenanceWindow.objects.create(starts_at=start, ends_at=end, reason=reason, created_at=T0)
    made.nodes.set(nodes)
    return made


def held_on(job: Job) -> str | None:
    job.refresh_from_db()
    hold = job.holds.first()
    return hold.node.name if hold is not None else None


def state_of(node: Node) -> str:
    node.refresh_from_db()
    return node.state


# Placement


def test_a_job_that_would_run_into_the_window_waits_for_its_end_naming_it(member, team):
    add_node("n1")
    window(hours(1), hours(3), reason="kernel upgrade")
    job = submit_job(member, team, time_limit_s=2 * 3600)

    assert schedule_pass(now=T0) == []

    job.refresh_from_db()
    assert job.stage == Stage.SUBMIT
    assert job.expected_start is not None and job.expected_start >= hours(3)
    assert "maintenance window" in job.wait_reason and "kernel upgrade" in job.wait_reason
    assert "21:00" in job.wait_reason  # when it starts


def test_a_job_that_ends_before_the_window_is_held_now(member, team):
    add_node("n1")
    window(hours(1), hours(3))
    job = submit_job(member, team, time_limit_s=3600)  # ends at the window's start, not in it

    schedule_pass(now=T0)

    assert held_on(job) == "n1"


def test_a_window_on_some_nodes_steers_jobs_to_the_others(member, team):
    kept, free = add_node("a-kept", cpus=1), add_node("b-free", cpus=4)  # best fit would pick the smaller
    window(hours(1), hours(3), kept)
    job = submit_job(member, team, time_limit_s=2 * 3600)

    schedule_pass(now=T0)

    assert held_on(job) == free.name


def test_a_window_on_no_node_is_on_every_node(member, team):
    add_node("n1")
    add_node("n2")
    window(hours(1), hours(3))
    job = submit_job(member, team, time_limit_s=2 * 3600)

    assert schedule_pass(now=T0) == []
    job.refresh_from_db()
    assert "maintenance window" in job.wait_reason


def test_during_the_window_a_waiting_job_still_names_it_and_starts_after_it(member, team):
    node = add_node("n1")
    maintenance = window(hours(1), hours(3), node, reason="new disks")
    turn(now=hours(1))  # beat drains the node at the start
    job = submit_job(member, team, time_limit_s=3600)

    assert schedule_pass(now=hours(2)) == []

    job.refresh_from_db()
    assert "new disks" in job.wait_reason  # not "no node is accepting work"
    assert job.expected_start == maintenance.ends_at


def test_the_job_starts_once_the_window_is_over_and_the_node_resumed(member, team):
    node = add_node("n1")
    window(hours(1), hours(3), node)
    job = submit_job(member, team, time_limit_s=2 * 3600)
    schedule_pass(now=T0)
    turn(now=hours(1))

    turn(now=hours(3))
    schedule_pass(now=hours(3))

    assert held_on(job) == "n1"


# Draining and resuming


def test_at_its_start_the_window_drains_its_nodes_by_the_system_once(operator):
    node, other = add_node("n1"), add_node("n2")
    maintenance = window(hours(1), hours(3), node, reason="new disks")

    assert turn(now=T0).drained == []  # not yet
    assert turn(now=hours(1)).drained == ["n1"]
    assert turn(now=hours(2)).drained == []

    node.refresh_from_db()
    maintenance.refresh_from_db()
    assert (node.state, node.state_changed_by, node.state_reason) == (
        Node.State.DRAINING, None, drain_reason(maintenance),
    )  # fmt: skip
    assert node.state_reason.startswith("maintenance window: new disks until")
    assert maintenance.drained_at == hours(1)
    assert state_of(other) == Node.State.ACTIVE


def test_at_its_end_the_window_resumes_its_nodes_and_their_history_shows_both():
    node = add_node("n1")
    maintenance = window(hours(1), hours(3), node)
    turn(now=hours(1))

    assert turn(now=hours(3)).resumed == ["n1"]
    assert turn(now=hours(4)).resumed == []

    maintenance.refresh_from_db()
    assert maintenance.resumed_at == hours(3)
    changes = NodeStateChange.objects.filter(node=node).order_by("at", "pk")
    assert [(c.to_state, c.at, c.by) for c in changes] == [
        (Node.State.DRAINING, hours(1), None), (Node.State.ACTIVE, hours(3), None),
    ]  # fmt: skip


def test_a_node_an_operator_drained_before_the_window_stays_drained_after_it(operator):
    node = add_node("n1")
    set_state(node, Node.State.DRAINING, now=T0, acting_user=operator, reason="failing disk")
    window(hours(1), hours(3), node)

    turn(now=hours(1))
    turn(now=hours(3))

    node.refresh_from_db()
    assert (node.state, node.state_reason) == (Node.State.DRAINING, "failing disk")


def test_a_node_an_operator_drained_during_the_window_stays_drained_after_it(operator):
    node = add_node("n1")
    window(hours(1), hours(3), node)
    turn(now=hours(1))
    set_state(node, Node.State.ACTIVE, now=hours(2), acting_user=operator, reason="done early")
    set_state(node, Node.State.DRAINING, now=hours(2), acting_user=operator, reason="failing disk")

    turn(now=hours(3))

    assert state_of(node) == Node.State.DRAINING


def test_a_proving_node_drained_by_the_window_proves_itself_again_after_it():
    node = add_node("n1", proving=True)
    window(hours(1), hours(3), node)
    turn(now=hours(1))

    turn(now=hours(3))

    assert state_of(node) == Node.State.PROVING


def test_overlapping_windows_keep_the_node_drained_until_the_last_ends():
    node = add_node("n1")
    window(hours(1), hours(3), node)
    window(hours(2), hours(5), node)
    turn(now=hours(1))
    turn(now=hours(2))

    turn(now=hours(3))
    assert state_of(node) == Node.State.DRAINING

    turn(now=hours(5))
    assert state_of(node) == Node.State.ACTIVE


def test_a_node_taken_off_a_window_under_way_resumes_at_its_end_all_the_same():
    node, other = add_node("n1"), add_node("n2")
    maintenance = window(hours(1), hours(3))  # on every node
    turn(now=hours(1))
    maintenance.nodes.set([node])  # an operator narrows it in the admin

    assert sorted(turn(now=hours(3)).resumed) == ["n1", "n2"]

    assert (state_of(node), state_of(other)) == (Node.State.ACTIVE, Node.State.ACTIVE)


def test_a_window_no_pass_saw_start_drains_and_resumes_nothing():
    node = add_node("n1")
    set_state(node, Node.State.DRAINING, now=T0, reason="maintenance window: by hand")
    maintenance = window(hours(1), hours(2), node)

    assert turn(now=hours(3)).resumed == []
    maintenance.refresh_from_db()
    assert maintenance.resumed_at == hours(3)


def test_a_pass_late_to_the_start_of_a_window_already_over_drains_nothing():
    node = add_node("n1")
    maintenance = window(hours(1), hours(2), node)
    assert turn(now=hours(3)).resumed == []  # a later pass saw it over before any saw it start

    assert turn(now=hours(1.5)).drained == []  # a pass that read it under way claims it only now

    maintenance.refresh_from_db()
    assert maintenance.drained_at is None
    assert state_of(node) == Node.State.ACTIVE


def test_the_end_of_a_window_resumes_what_a_drain_committed_after_the_pass_read_it():
    node = add_node("n1")
    maintenance = window(hours(1), hours(2), node)
    read_before_the_drain = MaintenanceWindow.objects.get(pk=maintenance.pk)
    turn(now=hours(1))

    assert _resume(read_before_the_drain, now=hours(2)) == ["n1"]

    assert state_of(node) == Node.State.ACTIVE


# What teams see


@pytest.mark.parametrize(
    "start, end, shown",
    [(hours(1), hours(2), True), (hours(-1), hours(1), True), (hours(-2), hours(-1), False),
     (hours(24 * 15), hours(24 * 15 + 1), False)],
)  # fmt: skip
def test_upcoming_windows_are_those_not_over_that_start_within_two_weeks(db, start, end, shown):
    made = window(start, end)

    assert (made in upcoming(now=T0)) is shown
