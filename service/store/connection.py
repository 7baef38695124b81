"""Opening a Redis client from :class:`Settings`: a URL, TLS, a cluster, or in-process memory.

- ``redis://[user:password@]host:port/db``, ``rediss://…`` (TLS) and ``unix://…`` go to
  ``redis.asyncio.Redis.from_url`` (hiredis parses replies when installed);
- ``settings.redis_cluster`` uses ``redis.asyncio.cluster.RedisCluster`` on the same URL;
- ``memory://NAME`` is fakeredis in this process, one shared ``FakeServer`` per URL, so
  that an API and a worker started in one process (tests, ``streamlearn serve`` without a
  Redis) see the same data. It has no persistence and no second process can reach it.

Clients keep raw bytes (``decode_responses=False``): blobs are binary.
"""

from __future__ import annotations

import threading
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from service.errors import StoreUnavailable
from service.settings import Settings

Client = Any  # redis.asyncio.Redis | RedisCluster (their common surface)

_FAKE_SERVERS: dict[str, Any] = {}
_FAKE_LOCK = threading.Lock()


def _fake_client(url: str) -> Client:
    import fakeredis  # only needed for memory://

    with _FAKE_LOCK:
        server = _FAKE_SERVERS.get(url)
        if server is None:
            server = _FAKE_SERVERS[url] = fakeredis.FakeServer(version=(7,))
    return fakeredis.FakeAsyncRedis(server=server, decode_responses=False)


def connect(settings: Settings) -> Client:
    """A client for ``settings.redis_url`` (no I/O happens until the first command)."""
    url = settings.redis_url or "memory://default"
    if url.startswith("memory://"):
        return _fake_client(url)
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise StoreUnavailable(
            f"redis_url must start with redis://, rediss://, unix:// or memory://, got {url!r}",
            field="redis_url",
        )
    common: dict[str, Any] = {
        "decode_responses": False,
        "socket_connect_timeout": 5,
        "health_check_interval": 30,
    }
    if settings.redis_cluster:
        return RedisCluster.from_url(url, **common)
    return aioredis.Redis.from_url(url, socket_keepalive=True, **common)


def is_cluster(client: Client) -> bool:
    """Whether ``client`` talks to a Redis Cluster (multi-slot commands must be split)."""
    return isinstance(client, RedisCluster)
