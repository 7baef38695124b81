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
