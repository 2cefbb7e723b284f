"""The Celery worker as a node of the pool.

e31site.celery names NodeStep by its path, so Celery loads this module when the worker builds its
blueprint, after Django is set up.
"""

from typing import Any

from celery import bootsteps
from celery.worker import WorkController
from django.conf import settings

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
        self.tref = worker.timer.call_repeatedly(settings.E31_HEARTBEAT_S, send_heartbeat)

    def stop(self, worker: WorkController) -> None:
        if self.tref is not None:
            self.tref.cancel()
