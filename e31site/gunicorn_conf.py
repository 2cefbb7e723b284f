"""gunicorn's settings for the web server: threads, client timeouts, a preloaded site (docs/deploy.md)."""

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
# Unused, and its one default path would be shared by every server of the machine.
control_socket_disable = True


def client_timeouts(listener: socket.socket, seconds: int) -> None:
    """Bound each read and write of the connections `listener` accepts: threads block on them unbounded."""
    timeval = struct.pack("ll", seconds, 0)  # struct timeval: seconds, microseconds
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)


def pre_fork(server: Any, worker: Any) -> None:
    # The preloaded site lives as long as the process: kept out of the collector's walks and off shared pages.
    gc.freeze()


def post_fork(server: Any, worker: Any) -> None:
    # Accepted connections inherit these on Linux; set again in each worker for listeners a reload made.
    for listener in worker.sockets:
        client_timeouts(listener, settings.E31_WEB_CLIENT_TIMEOUT_S)
