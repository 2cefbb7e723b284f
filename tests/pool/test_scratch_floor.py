"""A node keeps a floor of free scratch space: it reports its space with each heartbeat, and below the
floor the scheduler holds nothing there; the job is not lost, it waits with the reason."""

from django.utils import timezone

from jobs.lifecycle.actions import schedule_pass
from jobs.models import Stage
from pool.models import Node
from pool.nodes import Capacity, ScratchSpace, heartbeat, register
from tests.factories import submit_job


def test_a_job_waits_while_the_only_node_is_short_of_scratch_and_is_held_once_it_has_space(member, team):
    node = register("n1", Capacity(cpu_ids=[0, 1], memory_mb=2048, gpu_ids=[]), now=timezone.now())
    assert heartbeat("n1", now=timezone.now(), scratch=ScratchSpace(free_mb=100, min_free_mb=1024))
    job = submit_job(member, team)

    schedule_pass(now=timezone.now())
    job.refresh_from_db()
    assert job.stage == Stage.SUBMIT
    assert job.wait_reason == "n1 is short of scratch space: 100 MB free, keeps 1024 MB"

    heartbeat("n1", now=timezone.now(), scratch=ScratchSpace(free_mb=5000, min_free_mb=1024))
    schedule_pass(now=timezone.now())
    job.refresh_from_db()
    assert job.stage == Stage.RENT and job.active_hold.node == node


def test_a_heartbeat_without_a_report_keeps_the_last_one(db):
    register("n1", Capacity(cpu_ids=[0], memory_mb=1024, gpu_ids=[]), now=timezone.now())
    heartbeat("n1", now=timezone.now(), scratch=ScratchSpace(free_mb=100, min_free_mb=1024))

    heartbeat("n1", now=timezone.now())

    node = Node.objects.get(name="n1")
    assert (node.scratch_free_mb, node.scratch_min_free_mb, node.short_of_scratch) == (100, 1024, True)
