"""A Celery worker's plane: a node of the pool (NodeStep), or a platform worker (PlatformStep) when started with
`--platform KIND[,KIND...]` (the option e31site.celery adds); each step chooses the worker's queues, not `-Q`."""

import logging
import threading
from collections.abc import Callable
from typing import Any

from celery import bootsteps
from celery.worker import WorkController
from django.conf import settings

from isolation.checks import probe_node_on_start
from pool.models import queue_for
from worker import database
from worker.node import beat, start_node
from worker.sandbox import EngineGone, get_sandbox

log = logging.getLogger(__name__)


class Heartbeat(threading.Thread):
    """A thread, not the event loop's timer, which Celery blocks while it reconnects to a broker that is away."""

    def __init__(self, interval: float, beat: Callable[[], None]):
        super().__init__(name="e31-heartbeat", daemon=True)
        self.interval, self.beat = interval, beat
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                self.beat()
            except Exception:
                log.exception("heartbeat failed; the next one is in %ss", self.interval)

    def stop(self, timeout: float = 10) -> None:
        self.stopped.set()
        if self.is_alive():
            self.join(timeout)


def engine_runtimes() -> set[str] | None:
    """The runtimes the node's engine has; None (every runtime) when it does not answer: its rounds wait."""
    try:
        return get_sandbox().runtimes()
    except EngineGone:
        return None


class NodeStep(bootsteps.StartStopStep):
    """A worker started without `--platform` is a node: its node's queue only; it registers and heartbeats."""

    def __init__(self, worker: WorkController, platform: list[str] | None = None, **kwargs: Any):
        super().__init__(worker, **kwargs)
        self.enabled = not platform
        self.heartbeat: Heartbeat | None = None
        if self.enabled:
            worker.app.amqp.queues.select([queue_for(settings.E31_NODE_NAME)])

    def start(self, worker: WorkController) -> None:
        with database.unit_of_work():
            database.once_more(start_node)
        if settings.E31_PROBE_ON_START:
            with database.unit_of_work():
                probe_node_on_start(settings.E31_NODE_NAME, engine_runtimes=engine_runtimes())
        self.heartbeat = Heartbeat(settings.E31_HEARTBEAT_S, beat)
        self.heartbeat.start()

    def stop(self, worker: WorkController) -> None:
        if self.heartbeat is not None:
            self.heartbeat.stop()


class PlatformStep(bootsteps.Step):
    """A worker started with `--platform KIND[,KIND...]` consumes those kinds' queues only, and is no node."""

    def __init__(self, worker: WorkController, platform: list[str] | None = None, **kwargs: Any):
        super().__init__(worker, **kwargs)
        if platform:
            worker.app.amqp.queues.select([settings.E31_PLATFORM_QUEUES[kind] for kind in platform])
            log.info("a platform worker of %s; no node", ", ".join(platform))
