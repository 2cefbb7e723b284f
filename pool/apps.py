from django.apps import AppConfig
from django.db.models.signals import post_migrate


class PoolConfig(AppConfig):
    name = "pool"

    def ready(self) -> None:
        from pool import queues  # models are loaded only now; connecting here is Django's documented way

        post_migrate.connect(queues.make_default_queue, sender=self)
