"""Redis down → 503 with Retry-After (never a 500), and recovery when it returns."""

from __future__ import annotations

import asyncio
import signal
import uuid

import pytest

from service.settings import Settings
from tests.api.conftest import BINARY_SPEC, assert_error, dense, running
from tests.redis_servers import RedisServer

POS = {"features": [1.0, 0.0, 0.0, 0.0]}


@pytest.fixture
def server():  # type: ignore[no-untyped-def]
    with RedisServer() as srv:
        yield srv


async def test_503_while_redis_is_down_then_recovery(server: RedisServer) -> None:
    settings = Settings(
        redis_url=server.url, key_prefix=f"t{uuid.uuid4().hex[:8]}", cache_check_s=0.2
    )
    async with running(settings) as (_, c):
        assert (await c.put("/models/m", json=BINARY_SPEC)).status_code == 201
        assert (await c.post("/models/m/examples", json=dense(1))).status_code == 202
        assert (await c.post("/models/m/predict", json=POS)).status_code == 200
        server.stop()
        for call in (
            c.post("/models/m/examples", json=dense(0)),
            c.post("/models/m/predict", json=POS),  # keeping features for feedback needs Redis
            c.get("/models/m/metrics"),
            c.get("/models"),
            c.put("/models/other", json=BINARY_SPEC),
        ):
            r = await call
            assert_error(r, 503, "store_unavailable")
            assert r.headers["retry-after"] == "1"
        assert_error(await c.get("/readyz"), 503, "not_ready", "Redis")
        assert (await c.get("/healthz")).status_code == 200
        # served from memory, nothing kept: no Redis needed
        assert (await c.post("/models/m/predict?feedback=false", json=POS)).status_code == 200
        server.start()
        # a pooled connection may still be the dead one: at most a few 503s, never a 500
        for _ in range(50):
            r = await c.post("/models/m/examples", json=dense(0))
            if r.status_code != 503:
                break
            await asyncio.sleep(0.1)
        assert r.status_code == 202, r.text
        assert (await c.post("/models/m/predict", json=POS)).status_code == 200
        metrics = (await c.get("/models/m/metrics")).json()
        assert metrics["lag"] == 2  # both successful appends survived the restart (AOF always)


async def test_stale_pooled_connections_after_a_restart_are_retried(server: RedisServer) -> None:
    """Connections pooled before a Redis restart are dead; once Redis is back, the very first
    requests must succeed (one retry on a fresh connection), not surface as 503s."""
    settings = Settings(
        redis_url=server.url, key_prefix=f"t{uuid.uuid4().hex[:8]}", cache_check_s=60
    )
    async with running(settings) as (_, c):
        assert (await c.put("/models/m", json=BINARY_SPEC)).status_code == 201
        # fill the pool with several idle connections
        rs = await asyncio.gather(*(c.get("/models/m/metrics") for _ in range(20)))
        assert {r.status_code for r in rs} == {200}
        server.restart(signal.SIGKILL)
        rs = await asyncio.gather(
            *(c.post("/models/m/examples", json=dense(i)) for i in range(20)),
            *(c.get("/models/m/metrics") for _ in range(20)),
        )
        assert [r.status_code for r in rs] == [202] * 20 + [200] * 20, [r.text for r in rs]


async def test_a_hung_redis_is_a_prompt_503_and_readyz_answers(server: RedisServer) -> None:
    """SIGSTOP: Redis accepts connections but never answers. Requests that need it get a 503
    with Retry-After after the socket timeout instead of hanging; /readyz answers too."""
    settings = Settings(
        redis_url=server.url,
        key_prefix=f"t{uuid.uuid4().hex[:8]}",
        cache_check_s=0.2,
        redis_timeout_s=0.5,
    )
    async with running(settings) as (_, c):
        assert (await c.put("/models/m", json=BINARY_SPEC)).status_code == 201
        assert server.proc is not None
        server.proc.send_signal(signal.SIGSTOP)
        try:
            calls = (
                c.post("/models/m/examples", json=dense(0)),
                c.get("/models/m/metrics"),
                c.get("/models"),
                c.get("/readyz"),
            )
            # without socket timeouts each of these waits until Redis resumes (forever here)
            rs = await asyncio.wait_for(asyncio.gather(*calls), 20)
            for r in rs[:3]:
                assert_error(r, 503, "store_unavailable")
                assert r.headers["retry-after"] == "1"
            assert_error(rs[3], 503, "not_ready", "Redis")
        finally:
            server.proc.send_signal(signal.SIGCONT)
        for _ in range(50):
            r = await c.post("/models/m/examples", json=dense(0))
            if r.status_code == 202:
                break
            await asyncio.sleep(0.1)
        assert r.status_code == 202, r.text
