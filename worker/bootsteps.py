"""The Celery worker as a node of the pool (e31site.celery names NodeStep, loaded after Django's setup)."""

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
    """Calls `beat` every `interval` seconds until stopped. A thread, not the event loop's timer, which
    Celery blocks while it reconnects to a broker that is away: the node would be declared lost."""

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
    """Registers the node when the worker starts, consumes its own queue, and heartbeats while it runs."""

    def __init__(self, worker: WorkController, **kwargs: Any):
        super().__init__(worker, **kwargs)
        self.heartbeat: Heartbeat | None = None
        worker.app.amqp.queues.select_add(queue_for(settings.E31_NODE_NAME))

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
