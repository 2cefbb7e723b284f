"""The Celery worker as a node of the pool.

e31site.celery names NodeStep by its path, so Celery loads this module when the worker builds its
blueprint, after Django is set up.
"""

from typing import Any

from celery import bootsteps
from celery.worker import WorkController
from django.conf import settings

from isolation.checks import probe_node_on_start
from pool.models import queue_for
from worker.node import send_heartbeat, start_node


class NodeStep(bootsteps.StartStopStep):
    """Registers the node when the worker starts, consumes its own queue (where its runs are
    sent), and heartbeats while it runs."""

    requires = ("celery.worker.components:Timer",)

    def __init__(self, worker: WorkController, **kwargs: Any):
        super().__init__(worker, **kwargs)
        self.tref: Any = None
        worker.app.amqp.queues.select_add(queue_for(settings.E31_NODE_NAME))

    def start(self, worker: WorkController) -> None:
        start_node()
        if settings.E31_PROBE_ON_START:
            probe_node_on_start(settings.E31_NODE_NAME)
        # celery-types types worker.timer as the Timer bootstep (or None); at run time it is the timer that
        # step made (a kombu or timer2 Timer), which this step requires.
        self.tref = worker.timer.call_repeatedly(settings.E31_HEARTBEAT_S, send_heartbeat)  # type: ignore[union-attr]

    def stop(self, worker: WorkController) -> None:
        if self.tref is not None:
            self.tref.cancel()
