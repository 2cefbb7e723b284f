"""Two planes: a run goes to its node's queue, and nothing else does; every other task goes by its kind to a
platform queue, which only the platform workers of that kind consume (tests/test_harness.py and
tests/e2e/test_planes.py show it on the real processes)."""

import click
import pytest
from celery.app.amqp import Queues
from django.conf import settings

from e31site.celery import app, platform_kinds
from jobs.scheduling import dispatch
from tests.workers import make_run_platform
from worker.bootsteps import NodeStep, PlatformStep

RUN = "worker.run"


def tasks() -> set[str]:
    """Every task the workers know (Celery's own left out)."""
    app.loader.import_default_modules()
    return {name for name in app.tasks if not name.startswith("celery.")}


def queue_of(task: str, **options: str) -> str:
    return app.amqp.router.route(options, task)["queue"].name


def test_every_task_but_the_run_is_routed_by_its_kind_to_a_platform_queue():
    platform = set(settings.E31_PLATFORM_QUEUES.values())
    others = tasks() - {RUN}

    assert others, "the tasks were found"
    assert {task: queue_of(task) in platform for task in others} == dict.fromkeys(others, True)
    # Each by a route of its own, not by the default queue: a new task must be given its kind.
    assert set(settings.CELERY_TASK_ROUTES) == others


def test_the_run_is_routed_to_no_platform_queue_and_goes_to_the_queue_it_names():
    assert RUN not in settings.CELERY_TASK_ROUTES
    assert queue_of(RUN, queue="node.n1") == "node.n1"


def test_a_run_is_sent_to_its_nodes_queue(monkeypatch):
    sent = []
    monkeypatch.setattr(dispatch, "send", lambda task, *, args=None, queue=None, eta=None: sent.append((task, queue)))

    dispatch.dispatch_run("0b0e7c2e-9f6c-4a43-9d1a-6a1e0c8f2b11", "node.n1")

    assert sent == [(RUN, "node.n1")]


@pytest.mark.parametrize(
    ("task", "kind"),
    [
        ("jobs.schedule", "scheduler"),
        ("jobs.windows", "scheduler"),
        ("worker.reap", "scheduler"),
        ("isolation.judge", "isolation"),
        ("isolation.probe_pool", "isolation"),
        ("webhooks.deliver", "webhooks"),
        ("notify.send", "mail"),
        ("notify.digests", "mail"),
        ("schedules.due", "schedules"),
        ("jobs.retention", "upkeep"),
        ("accounting.verify_ledger", "upkeep"),
    ],
)
def test_each_task_goes_to_the_queue_of_its_kind(task, kind):
    assert queue_of(task) == f"platform.{kind}"


def test_no_two_kinds_share_a_queue_and_a_task_has_one_kind():
    queues = list(settings.E31_PLATFORM_QUEUES.values())
    named = [task for kind_tasks in settings.E31_PLATFORM_TASKS.values() for task in kind_tasks]

    assert len(set(queues)) == len(queues)
    assert len(set(named)) == len(named)


def test_make_run_starts_a_platform_worker_for_every_kind():
    assert set(make_run_platform()) == set(settings.E31_PLATFORM_TASKS)
    assert all(threads >= 1 for threads in make_run_platform().values())


# --- how a worker knows its plane ---------------------------------------------------------------------


class Worker:
    """What the steps see of a worker when they are made: its app's queues."""

    def __init__(self):
        self.queues = Queues(create_missing=True)
        self.app = type("App", (), {"amqp": type("AMQP", (), {"queues": self.queues})()})()


def test_a_worker_started_without_platform_is_a_node_consuming_its_own_queue_only(settings):
    settings.E31_NODE_NAME = "n7"
    worker = Worker()

    node = NodeStep(worker)
    PlatformStep(worker)

    assert node.include_if(worker)  # started: it registers the node and heartbeats
    assert set(worker.queues.consume_from) == {"node.n7"}


def test_a_platform_worker_consumes_its_kinds_queues_only_and_is_no_node(settings):
    settings.E31_NODE_NAME = "n7"
    worker = Worker()

    node = NodeStep(worker, platform=["webhooks", "mail"])
    PlatformStep(worker, platform=["webhooks", "mail"])

    assert not node.include_if(worker)  # never started: no registration, no heartbeat
    assert set(worker.queues.consume_from) == {"platform.webhooks", "platform.mail"}


def test_the_platform_option_takes_known_kinds_and_names_them_when_one_is_not():
    assert platform_kinds(None, None, "scheduler, upkeep") == ["scheduler", "upkeep"]
    assert platform_kinds(None, None, None) is None
    with pytest.raises(click.BadParameter, match="'webhook': name one or more of scheduler, isolation, webhooks, mail"):
        platform_kinds(None, None, "webhook")
