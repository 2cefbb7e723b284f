"""Sliding windows of events per key, shared by every web server: at most `limit` in any `seconds`."""

import math
import os
import time
from dataclasses import dataclass
from typing import Literal

from django.core.cache import BaseCache, caches
from django.core.cache.backends.redis import RedisCache
from redis.commands.core import Script

Mode = Literal["take", "wait", "add"]

# One script, so the check is atomic (two web servers cannot both take the last place) and one round trip,
# on Redis's clock, so skewed web servers count alike. KEYS[1]: the window's key. ARGV: its length in ms,
# its limit, a random name for the new event (two in one millisecond stay two), the mode:
#   take: record the event when fewer than `limit` are in the window;
#   wait: record nothing;
#   add:  record the event whatever the count (the oldest beyond `limit` are let go: they decide nothing).
# Returns the ms until one more event would be allowed: 0 when it is (and, for take, it was recorded).
_LUA = b"""
local key, window, limit, mode = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[4]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
if mode == 'add' or (mode == 'take' and count < limit) then
  redis.call('ZADD', key, now, ARGV[3])
  redis.call('PEXPIRE', key, window)
  count = count + 1
  if mode == 'add' and count > limit then
    redis.call('ZREMRANGEBYRANK', key, 0, count - limit - 1)
    count = limit
  end
  if mode == 'take' then return 0 end
end
if count < limit then return 0 end
local oldest = redis.call('ZRANGE', key, count - limit, count - limit, 'WITHSCORES')
return math.max(1, tonumber(oldest[2]) + window - now)
"""
_SCRIPT = Script(None, _LUA)  # type: ignore[arg-type]  # a script given as bytes needs no client to hash it


@dataclass(frozen=True)
class Window:
    limit: int
    seconds: int

    @classmethod
    def parse(cls, rate: str | None) -> "Window | None":
        """A rate such as "600/min" (per s, min, hour or day); None: no limit."""
        if not rate:
            return None
        count, period = rate.split("/")
        return cls(int(count), {"s": 1, "m": 60, "h": 3600, "d": 86400}[period[:1]])


def take(key: str, window: Window, *, store: BaseCache | None = None) -> float:
    """Record one event if the window has room: 0.0; else the seconds until it would have."""
    return _run(store, key, window, "take")


def wait(key: str, window: Window, *, store: BaseCache | None = None) -> float:
    """The seconds until the window has room for one more event (0.0: it has now)."""
    return _run(store, key, window, "wait")


def add(key: str, window: Window, *, store: BaseCache | None = None) -> float:
    """Record one event whatever the count; return the seconds until the window has room."""
    return _run(store, key, window, "add")


def _run(store: BaseCache | None, key: str, window: Window, mode: Mode) -> float:
    if store is None:
        store = caches["default"]  # the cache itself: isinstance cannot see through django.core.cache.cache
    # Under a name of their own, as a value of another kind under the key would make Redis refuse the script.
    key = f"window:{key}"
    if isinstance(store, RedisCache):
        full_key = store.make_and_validate_key(key)
        client = store._cache.get_client(full_key, write=True)  # type: ignore[attr-defined]  # (not in django-stubs)
        ms = _SCRIPT(
            keys=[full_key], args=[window.seconds * 1000, window.limit, os.urandom(8).hex(), mode], client=client
        )
        return int(ms) / 1000
    return _in_memory(store, key, window, mode)


def _in_memory(store: BaseCache, key: str, window: Window, mode: Mode) -> float:
    """The script's steps on any other cache: without a lock, so for one process only."""
    now = time.time()
    recent = [t for t in store.get(key, []) if t > now - window.seconds]
    if mode == "add" or (mode == "take" and len(recent) < window.limit):
        recent = [*recent, now][-window.limit :]
        store.set(key, recent, window.seconds)
        if mode == "take":
            return 0.0
    if len(recent) < window.limit:
        return 0.0
    oldest = recent[len(recent) - window.limit]
    return max(0.001, math.ceil((oldest + window.seconds - now) * 1000) / 1000)
