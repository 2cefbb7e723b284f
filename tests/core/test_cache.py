"""The Redis cache of production settings: Django's, with one client per connection pool."""

import importlib
import uuid

import pytest
from django.conf import settings
from django.utils.module_loading import import_string

from core.cache import SharedClientRedisCache


@pytest.fixture
def cache():
    # The broker's Redis database of this test process (settings_test): nobody else's keys.
    redis_cache = SharedClientRedisCache(settings.CELERY_BROKER_URL, {"KEY_PREFIX": f"cache-test-{uuid.uuid4().hex}"})
    yield redis_cache
    redis_cache.delete_many(["rate", "gone", "count"])  # not clear(): that would empty the broker's database
    redis_cache.close()
    redis_cache._cache._get_connection_pool(write=True).disconnect()


def test_the_production_settings_use_it():
    production = importlib.import_module("e31site.settings")  # the tests run on e31site.settings_test

    assert import_string(production.CACHES["default"]["BACKEND"]) is SharedClientRedisCache


def test_every_operation_uses_one_client_per_pool(cache):
    client = cache._cache.get_client(write=True)

    assert cache._cache.get_client() is client
    assert cache._cache.get_client(write=True) is client


def test_values_and_their_timeouts_behave_as_djangos_redis_cache(cache):
    cache.set("rate", [1.5, 2.5], 60)
    cache.set("gone", "x", 0)  # a timeout of 0 expires at once, as Django's backends agree

    assert cache.get("rate") == [1.5, 2.5]
    assert cache.get("gone") is None
    assert cache.add("rate", "other") is False
    assert cache.add("count", 1) is True
    assert cache.incr("count") == 2
