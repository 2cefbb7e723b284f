from typing import Any

from django.core.management.base import BaseCommand

from pool.queues import DEMO_QUEUES, define_queues


class Command(BaseCommand):
    help = "Make the demo's queues urgent, batch (the default) and scavenger; a queue changed in the admin is kept."

    def handle(self, *args: Any, **options: Any) -> None:
        for queue, written in define_queues(DEMO_QUEUES):
            self.stdout.write(f"{'set' if written else 'kept'}: queue {queue.name} (priority {queue.priority})")
