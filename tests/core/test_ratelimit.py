"""Sliding windows of events per key: the same rules on Redis (production, one Lua script) and on any
other cache (the tests' local memory)."""

import threading
import uuid

import pytest
from django.conf import settings
from django.core.cache.backends.locmem import LocMemCache

from core import ratelimit
from core.cache import SharedClientRedisCache
from core.ratelimit import Window

THREE_A_MINUTE = Window(3, 60)


@pytest.fixture(params=["redis", "memory"])
def store(request):
    if request.param == "memory":
        yield LocMemCache(f"ratelimit-{uuid.uuid4().hex}", {})
        return
    # The broker's Redis database of this test process (settings_test), under a prefix of this test's own.
    redis_cache = SharedClientRedisCache(settings.CELERY_BROKER_URL, {"KEY_PREFIX": f"ratelimit-{uuid.uuid4().hex}"})
    yield redis_cache
    # Not clear(): that would empty the broker's database.
    redis_cache.delete_many(["k", "window:k", "window:other", "window:fast"])
    redis_cache._cache._get_connection_pool(write=True).disconnect()


def test_a_window_takes_events_up_to_its_limit_then_says_how_long_to_wait(store):
    taken = [ratelimit.take("k", THREE_A_MINUTE, store=store) for _ in range(4)]

    assert taken[:3] == [0.0, 0.0, 0.0]
    assert 59 < taken[3] <= 60  # the first of the three ages out a minute after it came


def test_a_refused_event_is_not_counted(store):
    for _ in range(10):
        ratelimit.take("k", THREE_A_MINUTE, store=store)

    assert 59 < ratelimit.wait("k", THREE_A_MINUTE, store=store) <= 60


def test_keys_are_counted_apart(store):
    for _ in range(3):
        ratelimit.take("k", THREE_A_MINUTE, store=store)

    assert ratelimit.take("other", THREE_A_MINUTE, store=store) == 0.0


def age(store, key: str, seconds: float) -> None:
    """Move every event under `key` `seconds` into the past, as if that time had gone by (Redis counts
    by its own clock, which a test cannot turn)."""
    key = f"window:{key}"
    if isinstance(store, LocMemCache):
        store.set(key, [t - seconds for t in store.get(key, [])], 3600)
        return
    full_key = store.make_and_validate_key(key)
    client = store._cache.get_client(full_key, write=True)
    client.zadd(
        full_key, {member: score - seconds * 1000 for member, score in client.zrange(full_key, 0, -1, withscores=True)}
    )


def test_events_age_out_of_the_window(store):
    one_a_minute = Window(1, 60)
    assert ratelimit.take("fast", one_a_minute, store=store) == 0.0
    assert ratelimit.take("fast", one_a_minute, store=store) > 0

    age(store, "fast", 50)
    still_counted = ratelimit.take("fast", one_a_minute, store=store)
    age(store, "fast", 10.5)

    assert 0 < still_counted <= 10  # ten seconds (less the test's own time) to go
    assert ratelimit.take("fast", one_a_minute, store=store) == 0.0


def test_wait_records_nothing(store):
    for _ in range(5):
        assert ratelimit.wait("k", THREE_A_MINUTE, store=store) == 0.0

    assert ratelimit.take("k", THREE_A_MINUTE, store=store) == 0.0


def test_add_records_past_the_limit_and_the_wait_follows_the_newest_events(store):
    for _ in range(5):
        ratelimit.add("k", THREE_A_MINUTE, store=store)

    assert 59 < ratelimit.wait("k", THREE_A_MINUTE, store=store) <= 60
    assert ratelimit.take("k", THREE_A_MINUTE, store=store) > 0


def test_add_says_when_its_event_filled_the_window(store):
    added = [ratelimit.add("k", THREE_A_MINUTE, store=store) for _ in range(3)]

    assert added[:2] == [0.0, 0.0]
    assert 59 < added[2] <= 60  # the third filled it: one more waits for the first to age out


def test_racing_takes_never_pass_the_limit_on_redis():
    # Atomic on Redis: of 40 takes from 8 threads at once, exactly the limit's worth are let through.
    store = SharedClientRedisCache(settings.CELERY_BROKER_URL, {"KEY_PREFIX": f"ratelimit-{uuid.uuid4().hex}"})
    window, allowed, start = Window(10, 60), [], threading.Barrier(8)

    def client() -> None:
        start.wait()
        for _ in range(5):
            allowed.append(ratelimit.take("k", window, store=store) == 0.0)

    threads = [threading.Thread(target=client) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.delete("window:k")
    store._cache._get_connection_pool(write=True).disconnect()

    assert allowed.count(True) == 10 and len(allowed) == 40


@pytest.mark.parametrize(
    ("rate", "window"),
    [("600/min", Window(600, 60)), ("30/hour", Window(30, 3600)), ("5/s", Window(5, 1)), ("2/day", Window(2, 86400))],
)
def test_rates_are_read_as_the_settings_say_them(rate, window):
    assert Window.parse(rate) == window


def test_no_rate_is_no_window():
    assert Window.parse(None) is None and Window.parse("") is None


def test_a_value_left_under_the_same_name_by_other_code_is_not_in_the_way(store):
    store.set("k", [1.5, 2.5], 60)  # as DRF's throttles kept their lists, before an upgrade

    assert ratelimit.take("k", THREE_A_MINUTE, store=store) == 0.0
    assert store.get("k") == [1.5, 2.5]
