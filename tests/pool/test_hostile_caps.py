"""A team at (or near) its queue's per-team caps cannot dodge them by sending many jobs at once: one array's
tasks held in a single pass count against the cap as they are held."""

from datetime import UTC, datetime, timedelta

import pytest

from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, Stage
from pool.models import Queue
from pool.nodes import Capacity, register
from tests.factories import member_of, pool_default_queue, submit_array_of

T0 = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)


@pytest.fixture
def capped(db) -> Queue:
    queue = pool_default_queue()
    queue.max_running_jobs_per_team, queue.max_running_cores_per_team = 3, 4
    queue.save()
    register("n1", Capacity(cpu_ids=list(range(32)), memory_mb=65536, gpu_ids=[]), now=T0)
    return queue


def held_of(array) -> int:
    return Job.objects.filter(array=array).exclude(stage=Stage.SUBMIT).count()


def test_an_array_of_many_tasks_is_held_only_up_to_its_teams_job_cap_in_one_pass(member, team, capped):
    array = submit_array_of(member, team, range(20), time_limit_s=60)

    schedule_pass(now=T0 + timedelta(seconds=1))

    assert held_of(array) == 3


def test_an_array_is_held_only_up_to_its_teams_core_cap_and_another_team_still_runs(member, team, other_team, capped):
    array = submit_array_of(member, team, range(20), cpus=2, time_limit_s=60)
    theirs = submit_array_of(member_of(other_team, "bea"), other_team, range(1), time_limit_s=60)

    schedule_pass(now=T0 + timedelta(seconds=1))

    assert (held_of(array), held_of(theirs)) == (2, 1)
