"""A patch around a bug of kombu's Redis transport: a channel closed after Celery detached its transport raised
AttributeError, ending the worker; it raises redis' ConnectionError, which Celery handles by reconnecting."""

from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError

_PATCHED = "_e31_detached_transport_patch"


def apply() -> None:
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
