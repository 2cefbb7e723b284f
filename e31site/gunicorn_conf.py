"""gunicorn's settings for the web server (`gunicorn e31site.wsgi -c e31site/gunicorn_conf.py`); the
address and the number of workers stay on the command line.

The site is imported once, in gunicorn's arbiter, before it forks the workers (nothing at import
opens a connection: Django, Celery and the broker's Redis connect on first use, in each worker). Its
objects are then frozen out of the garbage collector's sight: they live as long as the process, and
a worker's collections would otherwise walk them all again and again, on the request path (measured
in docs/benchmarks.md). Freezing also keeps the collector from writing to the pages the workers share
with the arbiter (Python's documentation of gc.freeze says as much).
"""

import gc
from typing import Any

preload_app = True


def pre_fork(server: Any, worker: Any) -> None:
    gc.freeze()
