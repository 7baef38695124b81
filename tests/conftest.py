"""Shared fixtures.

Tests that depend on Redis semantics (streams, leases, scripts, transactions) use the real
server at ``STREAMLEARN_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``) under a unique
key prefix each, so tests can run side by side and never flush anything. Tests that do not
depend on Redis semantics use fakeredis.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

REDIS_URL = os.environ.get("STREAMLEARN_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
SPAMBASE = Path(__file__).resolve().parents[1] / "service" / "data" / "spambase.jsonl.gz"
SPAMBASE_ORDER = SPAMBASE.with_name("spambase_order.txt")


NO_REDIS = """\
{count} of the {total} selected tests need a Redis server (streams, leases and scripts are
tested on a real one), and none answers at {url}:
  {error}

Start one on this machine, e.g.:
  redis-server --port 6379 --save '' --appendonly no --daemonize yes
  (install it with `apt-get install redis-server`, `brew install redis`, ...)
  or: docker run -d -p 6379:6379 redis:7
or point the tests at another one:
  STREAMLEARN_TEST_REDIS_URL=redis://host:port/db python3 -m pytest -q
or run only the tests that need no Redis:
  python3 -m pytest -q -m "not redis"
"""


def redis_error(url: str) -> str | None:
    """Why the Redis at ``url`` does not answer a PING (None when it does)."""
    import redis  # local import: only the store may import redis in service code

    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    finally:
        client.close()
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses the real Redis (the ``redis_url`` fixture, directly or through
    ``settings``, ``api``, ...) is marked ``redis``, so ``-m "not redis"`` runs the rest."""
    for item in items:
        if "redis_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.redis)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Without a reachable Redis, say once how to get one, instead of a connection error in
    every test that needs it."""
    if session.config.option.collectonly:
        return
    needing = [i for i in session.items if i.get_closest_marker("redis") is not None]
    if not needing:
        return
    error = redis_error(REDIS_URL)
    if error is not None:
        message = NO_REDIS.format(
            count=len(needing), total=len(session.items), url=REDIS_URL, error=error
        )
        pytest.exit(message, returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture
def redis_url() -> str:
    """URL of the real Redis server the tests run against."""
    return REDIS_URL


@pytest.fixture
def key_prefix(redis_url: str) -> Iterator[str]:
    """A unique key prefix; every key under it is deleted after the test."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    yield prefix
    import redis  # local import: only the store may import redis in service code

    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i : i + 500])
    finally:
        client.close()


@pytest.fixture
def settings(redis_url: str, key_prefix: str):  # type: ignore[no-untyped-def]
    """Settings pointing at the real Redis under a unique prefix, with fast worker timings."""
    from service.settings import Settings

    return Settings(
        redis_url=redis_url,
        key_prefix=key_prefix,
        commit_ms=50,
        publish_ms=50,
        block_ms=20,
        lease_ttl_ms=2_000,
        heartbeat_ms=200,
    )


@pytest.fixture
def spambase_path() -> Path:
    """The Spambase shipped in the package (gzipped NDJSON); a test fails if it is missing."""
    if not SPAMBASE.is_file():
        pytest.fail(f"Spambase is missing at {SPAMBASE}: it ships with the package")
    return SPAMBASE


@pytest.fixture
def spambase_order_path() -> Path:
    if not SPAMBASE_ORDER.is_file():
        pytest.fail(f"Spambase's order is missing at {SPAMBASE_ORDER}: it ships with the package")
    return SPAMBASE_ORDER


@pytest.fixture
def output_dir(request: pytest.FixtureRequest) -> Path:
    """A per-test directory under test-output/ for screenshots and artefacts."""
    path = Path("test-output") / request.node.name.replace("/", "_")
    path.mkdir(parents=True, exist_ok=True)
    return path


__all__ = ["REDIS_URL", "SPAMBASE", "SPAMBASE_ORDER", "AsyncIterator"]
