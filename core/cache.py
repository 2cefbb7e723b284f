"""Django's Redis cache with one client per connection pool, not a new one (and its callback table) per operation."""

from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient


class SharedClientRedisCacheClient(RedisCacheClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        pool = self._get_connection_pool(write)  # type: ignore[attr-defined]  # (not in django-stubs)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)  # type: ignore[attr-defined]
        return client


class SharedClientRedisCache(RedisCache):
    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = SharedClientRedisCacheClient
