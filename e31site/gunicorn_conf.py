"""gunicorn's settings for the web server (`gunicorn e31site.wsgi -c e31site/gunicorn_conf.py`); the
address and the number of worker processes stay on the command line.

Threads, so that slow clients cannot hold the site: each process serves E31_WEB_THREADS requests at
once (gunicorn's gthread worker), and a download read at a modem's pace holds one thread, not a whole
process. A connection is only given a thread once its first bytes arrive (gunicorn keeps idle and
kept-alive connections in its poller), but from then on a thread reads the headers and the body and
writes the answer with blocking calls that gunicorn does not bound. So every client socket gets a
kernel timeout on each read and each write (SO_RCVTIMEO, SO_SNDTIMEO): a client that sends nothing,
or reads nothing, for E31_WEB_CLIENT_TIMEOUT_S seconds loses its connection (a stalled body is
answered 400 first: e31site.wsgi). The options are set on the listening socket, whose connections
inherit them on Linux. docs/deploy.md, "The web server", says why and what a proxy adds.

The site is imported once, in gunicorn's arbiter, before it forks the workers (nothing at import
opens a connection: Django, Celery and the broker's Redis connect on first use, in each worker). Its
objects are then frozen out of the garbage collector's sight: they live as long as the process, and
a worker's collections would otherwise walk them all again and again, on the request path (measured
in docs/benchmarks.md). Freezing also keeps the collector from writing to the pages the workers share
with the arbiter (Python's documentation of gc.freeze says as much).
"""

import gc
import os
import socket
import struct
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "e31site.settings")

from django.conf import settings  # noqa: E402  (the settings module is named first)

preload_app = True
worker_class = "e31site.gunicorn_worker.HeaderDeadlineWorker"  # gthread, with a deadline on headers
threads = settings.E31_WEB_THREADS
# Nothing uses gunicorn's control socket, and its one default path would be shared by every server of
# the machine (make run, the tests' servers).
control_socket_disable = True


def client_timeouts(listener: socket.socket, seconds: int) -> None:
    """Bound every read and write of the connections `listener` accepts to `seconds` of waiting."""
    timeval = struct.pack("ll", seconds, 0)  # struct timeval: seconds, microseconds
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)


def pre_fork(server: Any, worker: Any) -> None:
    gc.freeze()


def post_fork(server: Any, worker: Any) -> None:
    # The listeners are shared by every worker: setting them again is harmless, and covers listeners
    # made anew when the arbiter reloads.
    for listener in worker.sockets:
        client_timeouts(listener, settings.E31_WEB_CLIENT_TIMEOUT_S)
