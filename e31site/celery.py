import os

from celery import Celery, bootsteps
from celery.signals import celeryd_after_setup

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "e31site.settings")

app = Celery("e31site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@celeryd_after_setup.connect
def consume_node_queue(sender, instance, **kwargs):
    """Every worker is a node: it also consumes its own queue, where its runs are sent."""
    from django.conf import settings

    from pool.models import queue_for

    instance.app.amqp.queues.select_add(queue_for(settings.E31_NODE_NAME))


class NodeStep(bootsteps.StartStopStep):
    """Registers the node when the worker starts and heartbeats while it runs."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker, **kwargs):
        super().__init__(worker, **kwargs)
        self.tref = None

    def start(self, worker):
        from django.conf import settings

        from jobs.node import beat, start_node

        start_node()
        self.tref = worker.timer.call_repeatedly(settings.E31_HEARTBEAT_S, beat)

    def stop(self, worker):
        if self.tref is not None:
            self.tref.cancel()


app.steps["worker"].add(NodeStep)
