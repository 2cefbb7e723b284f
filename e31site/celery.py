import os

from celery import Celery

from worker import broker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "e31site.settings")

# A bug of kombu's Redis transport would stop the worker for good when the broker drops (worker/broker.py).
broker.apply()

app = Celery("e31site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Every worker is a node; named by path, so Celery loads it once Django is set up.
app.steps["worker"].add("worker.bootsteps:NodeStep")
