"""A node's worker starting again (worker.node.start_node) ends the runs its previous worker left, and
names itself as who did it."""

from datetime import timedelta

from django.utils import timezone

from jobs.models import JobEvent, Outcome, Stage
from jobs.scheduling import dispatch
from pool.models import Node
from pool.nodes import set_features
from tests import conftest
from tests.factories import RuntimeImageFactory, submit_job
from tests.jobs.conftest import held, running
from worker import node


class NoContainers:
    """The engine as a node with no containers left finds it (the test's subject is the database's side)."""

    def orphans(self, *, node: str, keep: set[str]) -> list[str]:
        return []


def test_a_restarted_node_is_named_as_who_released_the_runs_it_lost(member, team, local_node, monkeypatch):
    monkeypatch.setattr(node, "get_sandbox", NoContainers)
    now = timezone.now()
    job = running(held(submit_job(member, team, image=RuntimeImageFactory()), now=now), now=now)

    node.start_node()

    job.refresh_from_db()
    event = job.events.last()
    assert (job.stage, job.outcome) == (Stage.RELEASE, Outcome.NODE_LOST)
    assert (event.stage, event.outcome, event.actor) == (Stage.RELEASE, Outcome.NODE_LOST, f"node {local_node.name}")


def test_a_restarted_node_is_named_on_the_retry_of_a_run_it_lost(member, team, local_node, monkeypatch):
    monkeypatch.setattr(node, "get_sandbox", NoContainers)
    now = timezone.now() - timedelta(seconds=5)
    job = running(held(submit_job(member, team, image=RuntimeImageFactory(), max_retries=1), now=now), now=now)

    node.start_node()

    retry = JobEvent.objects.get(job=job, event="retry")
    assert (retry.outcome, retry.actor) == (Outcome.NODE_LOST, f"node {local_node.name}")


def test_a_starting_node_asks_for_a_scheduler_pass_for_the_jobs_waiting_meanwhile(
    member, team, local_node, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(node, "get_sandbox", NoContainers)
    submit_job(member, team, image=RuntimeImageFactory())
    del conftest.SENT[:]

    with django_capture_on_commit_callbacks(execute=True):
        node.start_node()

    assert conftest.SENT == [(dispatch.SCHEDULE_TASK, None, None)]


def test_a_node_started_with_e31_node_features_has_exactly_those(local_node, settings, monkeypatch):
    monkeypatch.setattr(node, "get_sandbox", NoContainers)
    set_features(local_node, ["gpu-a100", "nvme"])  # an operator's, before the worker says otherwise
    settings.E31_NODE_FEATURES = ["bigmem", "nvme"]

    node.start_node()

    assert Node.objects.get(pk=local_node.pk).features == ["bigmem", "nvme"]


def test_a_node_started_without_e31_node_features_keeps_those_set_in_the_admin(local_node, settings, monkeypatch):
    monkeypatch.setattr(node, "get_sandbox", NoContainers)
    set_features(local_node, ["bigmem"])
    settings.E31_NODE_FEATURES = None

    node.start_node()

    assert Node.objects.get(pk=local_node.pk).features == ["bigmem"]


def test_a_new_node_started_with_e31_node_features_registers_with_them(db, settings, monkeypatch):
    monkeypatch.setattr(node, "get_sandbox", NoContainers)
    settings.E31_NODE_FEATURES = ["gpu-h100"]

    node.start_node()

    assert Node.objects.get(name=settings.E31_NODE_NAME).features == ["gpu-h100"]
