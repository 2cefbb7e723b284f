"""The Celery worker as a node of the pool.

e31site.celery names NodeStep by its path, so Celery loads this module when the worker builds its
blueprint, after Django is set up.
"""

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

log = logging.getLogger(__name__)


class Heartbeat(threading.Thread):
    """Calls `beat` every `interval` seconds until stopped; a beat that fails is logged, the next one
    comes on time.

    A thread of its own, not the worker's event-loop timer: while the broker is away Celery's consumer
    blocks that loop to reconnect, and a node whose heartbeats stop for E31_NODE_LOST_S is lost.
    """

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


class NodeStep(bootsteps.StartStopStep):
    """Registers the node when the worker starts, consumes its own queue (where its runs are
    sent), and heartbeats while it runs."""

    def __init__(self, worker: WorkController, **kwargs: Any):
        super().__init__(worker, **kwargs)
        self.heartbeat: Heartbeat | None = None
        worker.app.amqp.queues.select_add(queue_for(settings.E31_NODE_NAME))

    def start(self, worker: WorkController) -> None:
        with database.unit_of_work():
            database.once_more(start_node)
        if settings.E31_PROBE_ON_START:
            probe_node_on_start(settings.E31_NODE_NAME)
        self.heartbeat = Heartbeat(settings.E31_HEARTBEAT_S, beat)
        self.heartbeat.start()

    def stop(self, worker: WorkController) -> None:
        if self.heartbeat is not None:
            self.heartbeat.stop()
