"""Queues in the scheduler pass: a higher queue is served first whatever the fair-share, fair-share still
orders the jobs within a queue, and a team at its queue's per-team cap waits, the queue named, while
another team's job in the same queue runs."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Stage
from pool.models import Queue, TeamQueue
from pool.nodes import Capacity, register
from pool.queues import DEMO_QUEUES, default_queue, define_queues
from tests.factories import TeamFactory, member_of, pool_default_queue, submit_job
from tests.pool.test_reservations import ends, running_job

T0 = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)


def add_node(name: str, *, cpus: int) -> None:
    register(name, Capacity(cpu_ids=list(range(cpus)), memory_mb=4096, gpu_ids=[]), now=T0)


def held(jobs: list[Job]) -> set[str]:
    return {j.name for j in jobs if Job.objects.get(pk=j.pk).stage != Stage.SUBMIT}


@pytest.fixture
def urgent(db) -> Queue:
    return Queue.objects.create(name="urgent", priority=100, preempts_lower=True)


@pytest.fixture
def batch(db) -> Queue:
    return pool_default_queue()


def test_a_job_of_a_higher_queue_is_held_before_jobs_submitted_earlier(member, team, urgent, batch):
    add_node("n1", cpus=1)
    earlier = [submit_job(member, team, name=f"batch {n}", time_limit_s=60) for n in range(3)]
    late = submit_job(member, team, name="urgent", queue=urgent, time_limit_s=60)

    [hold] = schedule_pass(now=T0)

    assert hold.job_id == late.pk
    assert held(earlier) == set()


def test_fair_share_still_orders_the_jobs_within_a_queue(member, team, other_team, batch):
    bea = member_of(other_team, "bea")
    add_node("n1", cpus=1)
    busy = running_job(member, team, time_limit_s=600, at=T0)  # red has used the pool: blue goes first
    red = submit_job(member, team, name="red", time_limit_s=60)
    blue = submit_job(bea, other_team, name="blue", time_limit_s=60)
    ends(busy, at=T0 + timedelta(minutes=5))

    [hold] = schedule_pass(now=T0 + timedelta(minutes=5))

    assert (hold.job_id, held([red])) == (blue.pk, set())


def test_a_team_at_its_queues_core_cap_waits_naming_the_queue_while_another_team_runs(member, team, other_team, batch):
    batch.max_running_cores_per_team = 2
    batch.save()
    bea = member_of(other_team, "bea")
    add_node("n1", cpus=4)
    running_job(member, team, cpus=2, time_limit_s=600, at=T0)
    capped = submit_job(member, team, name="red again", time_limit_s=60)
    blue = submit_job(bea, other_team, name="blue", time_limit_s=60)

    holds = schedule_pass(now=T0 + timedelta(seconds=1))

    assert [h.job_id for h in holds] == [blue.pk]
    capped.refresh_from_db()
    assert capped.stage == Stage.SUBMIT
    assert "in queue batch" in capped.wait_reason and "limit is 2" in capped.wait_reason


def test_a_team_at_its_queues_job_cap_waits_and_its_other_queue_is_not_capped(member, team, urgent, batch):
    batch.max_running_jobs_per_team = 1
    batch.save()
    add_node("n1", cpus=4)
    running_job(member, team, time_limit_s=600, at=T0)
    capped = submit_job(member, team, name="second batch job", time_limit_s=60)
    other = submit_job(member, team, name="urgent job", queue=urgent, time_limit_s=60)

    holds = schedule_pass(now=T0 + timedelta(seconds=1))

    assert [h.job_id for h in holds] == [other.pk]
    capped.refresh_from_db()
    assert "runs 1 job in queue batch, its limit of 1" in capped.wait_reason


def test_a_job_naming_no_queue_goes_to_its_teams_own_default_else_the_pools(team, other_team, urgent, batch):
    TeamQueue.objects.create(team=team, queue=urgent)

    assert (default_queue(team), default_queue(other_team)) == (urgent, batch)


@pytest.fixture
def demo_team(db):
    return TeamFactory(slug="demo", name="Demo team")


def test_the_demo_queues_are_made_once_and_an_operators_change_is_kept(demo_team, operator):
    define_queues(DEMO_QUEUES)
    scavenger = Queue.objects.get(name="scavenger")
    scavenger.priority, scavenger.changed_by, scavenger.changed_at = 5, operator, T0
    scavenger.save()

    again = define_queues(DEMO_QUEUES)

    queues = {q.name: (q.priority, q.is_default, q.preempts_lower, q.opt_out_allowed) for q in Queue.objects.all()}
    assert queues == {
        "urgent": (100, False, True, True),
        "batch": (50, True, False, True),
        "scavenger": (5, False, False, False),
    }
    assert [written for _queue, written in again] == [False, False, False]
    assert [t.slug for t in Queue.objects.get(name="urgent").teams.all()] == ["demo"]


def test_make_runs_command_sets_the_demo_queues_and_says_who_may_preempt(demo_team):
    first, again = StringIO(), StringIO()

    call_command("demo_queues", stdout=first)
    call_command("demo_queues", stdout=again)

    urgent = "queue urgent (priority 100): preempts lower queues' jobs; only the team demo may use it"
    assert first.getvalue().splitlines() == [
        f"set: {urgent}", "set: queue batch (priority 50)", "set: queue scavenger (priority 0)",
    ]  # fmt: skip
    assert again.getvalue().splitlines() == [
        f"kept: {urgent}", "kept: queue batch (priority 50)", "kept: queue scavenger (priority 0)",
    ]  # fmt: skip
    assert Queue.objects.get(is_default=True).name == "batch"
    assert Queue.objects.prefetch_related("teams").get(name="urgent").preempts


def test_the_demo_urgent_queue_made_before_it_named_teams_is_given_the_demo_team(demo_team):
    """A pool whose urgent queue preempts for every team, as `make run` left it, is set right by the next run."""
    Queue.objects.create(name="urgent", priority=100, preempts_lower=True, opt_out_allowed=True)

    out = StringIO()
    call_command("demo_queues", stdout=out)

    assert out.getvalue().splitlines()[0].startswith("set: queue urgent (priority 100): preempts")
    assert [t.slug for t in Queue.objects.get(name="urgent").teams.all()] == ["demo"]


def test_the_demo_queues_need_the_demo_team(db):
    with pytest.raises(CommandError, match="names the team demo, which does not exist: make it first"):
        call_command("demo_queues", stdout=StringIO())
    assert not Queue.objects.filter(name="urgent").exists()


def test_a_flushed_pool_gets_its_default_queue_again_and_an_operators_queues_are_kept(transactional_db):
    call_command("flush", interactive=False, verbosity=0)  # as a live server's test leaves the database
    assert list(Queue.objects.values_list("name", "is_default")) == [("batch", True)]

    Queue.objects.all().delete()
    Queue.objects.create(name="night")
    call_command("migrate", verbosity=0)
    assert list(Queue.objects.values_list("name", flat=True)) == ["night"]
