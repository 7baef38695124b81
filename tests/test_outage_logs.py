"""Quiet logs during a Redis outage: one line when Redis goes away, one when it is back, no
tracebacks for an expected condition — in the API (with many cached models) and the worker
(and no ``Unclosed … client`` warnings from half-used pipelines afterwards)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator

import pytest

from service.settings import Settings
from service.store import Store
from tests.api.conftest import BINARY_SPEC, running
from tests.redis_servers import RedisServer
from tests.workers.support import append_all, batches, spec

pytestmark = pytest.mark.timeout(120)

MODELS = 30


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer() as srv:
        yield srv


def noisy(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info or "nclosed" in r.getMessage()]


def lines(caplog: pytest.LogCaptureFixture, *words: str) -> list[str]:
    msgs = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    return [m for m in msgs if all(w in m for w in words)]


async def test_api_logs_one_line_per_state_change(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    settings = Settings(
        redis_url=server.url, key_prefix=f"t{uuid.uuid4().hex[:8]}", cache_check_s=0.1
    )
    async with running(settings) as (_, c):
        for i in range(MODELS):
            assert (await c.put(f"/models/m{i}", json=BINARY_SPEC)).status_code == 201
            pred = await c.post(f"/models/m{i}/predict", json={"features": [1, 0, 0, 0]})
            assert pred.status_code == 200
        caplog.clear()
        server.stop()
        for _ in range(5):  # requests during the outage, while the cache check keeps failing
            r = await c.post("/models/m0/examples", json={"features": [1, 0, 0, 0], "label": 1})
            assert r.status_code == 503
            await asyncio.sleep(0.2)
        server.start()
        for _ in range(100):
            await asyncio.sleep(0.05)
            if lines(caplog, "Redis", "again"):
                break
        r = await c.post("/models/m0/examples", json={"features": [1, 0, 0, 0], "label": 1})
        assert r.status_code == 202
    assert not noisy(caplog), [r.getMessage() for r in noisy(caplog)]
    assert len(lines(caplog, "Redis", "unreachable")) == 1, lines(caplog, "Redis")
    assert len(lines(caplog, "Redis", "again")) == 1, lines(caplog, "Redis")


async def test_worker_logs_one_line_per_state_change(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    from workers.trainer import Worker

    caplog.set_level(logging.INFO)
    settings = Settings(
        redis_url=server.url,
        key_prefix=f"t{uuid.uuid4().hex[:8]}",
        commit_ms=20,
        publish_ms=20,
        block_ms=20,
        heartbeat_ms=100,
        lease_ttl_ms=5_000,
    )
    store = Store.open(settings, worker=True)
    await store.create_model("m", spec())
    await append_all(store, "m", batches(500, seed=1))
    worker = Worker(settings, store)
    task = asyncio.create_task(worker.run())
    try:
        for _ in range(200):
            await asyncio.sleep(0.02)
            if (await store.metrics("m")).examples_seen == 500:
                break
        caplog.clear()
        server.stop()
        await asyncio.sleep(2.5)  # several retries (0.2, 0.4, 0.8 s …)
        server.start()
        await append_all(store, "m", batches(100, seed=2))
        for _ in range(300):
            await asyncio.sleep(0.02)
            if (await store.metrics("m")).examples_seen == 600:
                break
        assert (await store.metrics("m")).examples_seen == 600
    finally:
        worker.stop()
        await asyncio.wait_for(task, 10)
        await store.close()
    assert not noisy(caplog), [r.getMessage() for r in noisy(caplog)]
    assert len(lines(caplog, "Redis", "unreachable")) == 1, lines(caplog, "Redis")
    assert len(lines(caplog, "Redis", "again")) == 1, lines(caplog, "Redis")


async def test_failed_pipelines_leave_no_unclosed_client(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A pipelined call that fails while Redis is down (script loading included) gives its
    connection back: nothing is reported later as an unclosed client."""
    import gc
    import warnings

    from service.store import Lease

    settings = Settings(redis_url=server.url, key_prefix=f"t{uuid.uuid4().hex[:8]}")
    store = Store.open(settings, worker=True)
    try:
        await store.create_model("m", spec())
        lease = await store.acquire("m", "w1")
        assert isinstance(lease, Lease)
        server.stop()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for call in (
                store.renew([lease]),
                store.metrics("m"),
                store.list_versions("m"),
                store.get_version("m", 1),
                store.metrics_many(["m"]),
            ):
                with pytest.raises(Exception, match="unavailable"):
                    await call
            gc.collect()
            await asyncio.sleep(0)
        unclosed = [str(w.message) for w in caught if "nclosed" in str(w.message)]
        assert not unclosed, unclosed
        assert not noisy(caplog), [r.getMessage() for r in noisy(caplog)]
    finally:
        server.start()
        await store.close()
