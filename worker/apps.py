from django.apps import AppConfig


class WorkerConfig(AppConfig):
    """The machine side: what runs on a node of the pool, the lost-node reaper and the runtime image builds."""

    name = "worker"
