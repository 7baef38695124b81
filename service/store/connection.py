"""Opening a Redis client from :class:`Settings`: a URL, TLS, a cluster, or in-process memory.

- ``redis://[user:password@]host:port/db``, ``rediss://…`` (TLS) and ``unix://…`` go to
  ``redis.asyncio.Redis.from_url`` (hiredis parses replies when installed);
- ``settings.redis_cluster`` uses ``redis.asyncio.cluster.RedisCluster`` on the same URL;
- ``memory://NAME`` is fakeredis in this process, one shared ``FakeServer`` per URL, so
  that an API and a worker started in one process (tests, ``streamlearn serve`` without a
  Redis) see the same data. It has no persistence and no second process can reach it.

Clients keep raw bytes (``decode_responses=False``): blobs are binary.

The pool is sized and bounded on purpose (``settings.redis_max_connections`` per process): a
request that finds every connection busy *waits* up to ``redis_pool_timeout_s`` for one
(redis-py's ``BlockingConnectionPool``) instead of failing at once with "Too many
connections". Every socket has a connect and read timeout (``redis_timeout_s`` in the API,
``redis_worker_timeout_s`` in the worker), so a hung Redis is a 503 within about a second,
not a request held for minutes. A command that fails with a *connection* error (a pooled
socket a Redis restart left dead) is retried once on a fresh connection; timeouts are never
retried (the command may have run). Connections idle for ``HEALTH_CHECK_S`` are PINGed
before use.
"""

from __future__ import annotations

import threading
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from service.errors import StoreUnavailable
from service.settings import Settings

Client = Any  # redis.asyncio.Redis | RedisCluster (their common surface)

HEALTH_CHECK_S = 15  # PING a connection idle this long before handing it out

_FAKE_SERVERS: dict[str, Any] = {}
_FAKE_LOCK = threading.Lock()


def _fake_client(url: str) -> Client:
    import fakeredis  # only needed for memory://

    with _FAKE_LOCK:
        server = _FAKE_SERVERS.get(url)
        if server is None:
            server = _FAKE_SERVERS[url] = fakeredis.FakeServer(version=(7,))
    return fakeredis.FakeAsyncRedis(server=server, decode_responses=False)


def retry_once() -> Retry:
    """One immediate retry, on connection errors only (never on a timeout)."""
    return Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))


def connect(settings: Settings, *, worker: bool = False) -> Client:
    """A client for ``settings.redis_url`` (no I/O happens until the first command).

    ``worker`` selects the worker's socket timeout (``redis_worker_timeout_s``).
    """
    url = settings.redis_url or "memory://default"
    if url.startswith("memory://"):
        return _fake_client(url)
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise StoreUnavailable(
            f"redis_url must start with redis://, rediss://, unix:// or memory://, got {url!r}",
            field="redis_url",
        )
    timeout = settings.redis_worker_timeout_s if worker else settings.redis_timeout_s
    common: dict[str, Any] = {
        "decode_responses": False,
        "socket_connect_timeout": timeout,
        "socket_timeout": timeout,
        "health_check_interval": HEALTH_CHECK_S,
        "retry": retry_once(),
    }
    if settings.redis_cluster:
        return RedisCluster.from_url(url, max_connections=settings.redis_max_connections, **common)
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        max_connections=settings.redis_max_connections,
        timeout=settings.redis_pool_timeout_s,
        socket_keepalive=True,
        **common,
    )
    return aioredis.Redis.from_pool(pool)


def is_cluster(client: Client) -> bool:
    """Whether ``client`` talks to a Redis Cluster (multi-slot commands must be split)."""
    return isinstance(client, RedisCluster)
