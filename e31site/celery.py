import os

import click
from celery import Celery
from django.conf import settings

from worker import broker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "e31site.settings")

# A bug of kombu's Redis transport would stop the worker for good when the broker drops (worker/broker.py).
broker.apply()


def platform_kinds(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str] | None:
    """`--platform scheduler,upkeep` → its kinds, each one of E31_PLATFORM_TASKS; none given: a node."""
    if value is None:
        return None
    kinds = [kind.strip() for kind in value.split(",") if kind.strip()]
    if not kinds or any(kind not in settings.E31_PLATFORM_QUEUES for kind in kinds):
        raise click.BadParameter(f"{value!r}: name one or more of {', '.join(settings.E31_PLATFORM_QUEUES)}")
    return kinds


app = Celery("e31site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Two planes: a worker is its machine's node unless started with --platform; both steps read that option, and
# are named by path, so Celery loads them once Django is set up.
PLATFORM = click.Option(
    ["--platform"], metavar="KIND[,KIND...]", default=None, callback=platform_kinds,
    help="Be a platform worker of these kinds of work (their queues only), not a node.",
)  # fmt: skip
app.user_options["worker"].add(PLATFORM)
app.steps["worker"].add("worker.bootsteps:NodeStep")
app.steps["worker"].add("worker.bootsteps:PlatformStep")
