from typing import Any

from django.core.management.base import BaseCommand, CommandError

from pool.queues import DEMO_QUEUES, NoSuchTeam, define_queues, preemption_words


class Command(BaseCommand):
    help = (
        "Make the demo's queues urgent (the demo team's only), batch (the default) and scavenger; a queue changed "
        "in the admin is kept. The team demo must exist (manage.py create_team demo)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            defined = define_queues(DEMO_QUEUES)
        except NoSuchTeam as exc:
            raise CommandError(f"{exc}: make it first (manage.py create_team demo)") from None
        for queue, written in defined:
            said = f"{'set' if written else 'kept'}: queue {queue.name} (priority {queue.priority})"
            if queue.preempts_lower:
                said += f": {preemption_words(queue)}"
            self.stdout.write(said)
