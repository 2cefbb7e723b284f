"""A patch around a bug of kombu's Redis transport that stops a worker for good when the broker drops.

The bug (kombu 5.7.0 with celery 5.7.0; still in the latest releases when this was written):

1. The broker's connection drops while a task acknowledged late is running (every `worker.run` is).
   Celery's consumer (`Consumer.on_connection_error_after_connected`) first calls
   `connection.collect()`, which closes the default channel and then detaches the transport from
   its connection (`Connection._do_close_transport`: `transport.client = None`).
2. The Redis channel's first `close()` stops half-way: it reads the pending BRPOP reply of the dead
   socket, which raises a connection error (ignored), so the channel is never marked closed.
3. Celery then calls `connection.close()`, which closes the same channel again. This time the channel
   drops its connection pool and restores its unacknowledged messages, which needs a new pool, built
   from `self.connection.client.hostname`: the transport was detached, `client` is None, and the
   `AttributeError` is not one of the transport's connection errors. Celery takes it as an
   unrecoverable error: the worker ends once its running tasks finish. The acknowledgement of a task
   that finishes later, on the old channel, fails the same way.

The patch: a Redis channel whose transport was detached answers with the transport's own connection
error (redis' `ConnectionError`) instead of building a pool. Celery and kombu handle that error
where it can occur: the restore at close is skipped (Redis restores the unacknowledged message after
its visibility timeout; a second delivery of a run does nothing), a late acknowledgement is logged,
and the consumer reconnects. `apply()` runs when the Celery app is made (`e31site/celery.py`), in
every process that talks to the broker.
"""

from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError

_PATCHED = "_e31_detached_transport_patch"


def apply() -> None:
    """Patch kombu's Redis channel (once; a second call does nothing)."""
    channel = kombu_redis.Channel
    if getattr(channel, _PATCHED, False):
        return
    original = getattr(channel, "_connparams")  # noqa: B009 (private, not in kombu's type stubs)

    def _connparams(self: Any, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection is None or self.connection.client is None:
            raise RedisConnectionError("the broker connection of this channel was closed")
        return original(self, asynchronous=asynchronous)

    setattr(channel, "_connparams", _connparams)  # noqa: B010
    setattr(channel, _PATCHED, True)
