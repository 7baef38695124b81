"""Idle cost with many models: the API polls no model's head per period.

Against a private ``redis-server`` (``INFO commandstats`` then counts only this test's
commands): once the events subscription is up and one full check is done, a check period
reads at most ``SWEEP`` cached models, however many are cached; a deleted model is dropped
through its events channel; a re-established subscription is followed by a full check.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from service.api.cache import SWEEP
from service.settings import Settings
from tests.api.conftest import BINARY_SPEC, eventually, running
from tests.redis_servers import RedisServer

POS = {"features": [1.0, 0.0, 0.0, 0.0]}


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer(extra_args=["--appendonly", "no"]) as srv:
        yield srv


async def commands(client: Any) -> int:
    """Commands Redis has run so far (scripts' inner calls included), INFO itself left out."""
    stats = await client.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")


async def serve(c: Any, names: list[str]) -> None:
    for m in names:
        assert (await c.put(f"/models/{m}", json=BINARY_SPEC)).status_code == 201
        assert (await c.post(f"/models/{m}/predict?feedback=false", json=POS)).status_code == 200


async def idle_commands(cache: Any, client: Any, periods: int) -> tuple[int, int]:
    """(Redis commands, check periods) over at least ``periods`` idle periods."""
    sweeps, full = cache.sweeps, cache.full_checks
    before = await commands(client)
    await eventually(lambda: _after(cache, sweeps + periods), timeout=30)
    spent = await commands(client) - before
    assert cache.full_checks == full  # idle: no full check
    return spent, cache.sweeps - sweeps


async def _after(cache: Any, sweeps: int) -> bool:
    return bool(cache.sweeps >= sweeps)


async def test_idle_polling_does_not_grow_with_the_cached_models(server: RedisServer) -> None:
    settings = Settings(
        redis_url=server.url, key_prefix=f"t{uuid.uuid4().hex[:8]}", cache_check_s=0.05
    )
    client = aioredis.Redis.from_url(server.url)
    try:
        async with running(settings) as (app, c):
            cache = app.state.sl.cache
            await serve(c, ["a0", "a1", "a2"])
            assert await eventually(lambda: _listening(cache))
            few, few_periods = await idle_commands(cache, client, 10)
            await serve(c, [f"b{i}" for i in range(150)])
            assert len(cache.entries) == 153
            await eventually(lambda: _after(cache, cache.sweeps + 1))
            many, many_periods = await idle_commands(cache, client, 10)
            # a full check of 153 models is ~306 commands; a sweep reads SWEEP models (2
            # commands each) whatever the number cached: per period, never more than that
            # (plus the odd connection health-check PING)
            assert many <= (many_periods + 1) * (2 * SWEEP + 2), (many, many_periods)
            assert few <= (few_periods + 1) * (2 * 3 + 2), (few, few_periods)
    finally:
        await client.aclose()


async def _listening(cache: Any) -> bool:
    return bool(cache.listening)


async def test_a_deleted_model_is_dropped_through_its_channel(server: RedisServer) -> None:
    settings = Settings(
        redis_url=server.url, key_prefix=f"t{uuid.uuid4().hex[:8]}", cache_check_s=3600
    )
    async with running(settings) as (app, c):
        cache = app.state.sl.cache
        await serve(c, ["gone", "kept"])
        assert await eventually(lambda: _listening(cache))
        assert (await c.delete("/models/gone")).status_code == 204

        async def dropped() -> bool:
            return "gone" not in cache.entries

        assert await eventually(dropped)
        assert "kept" in cache.entries
        r = await c.post("/models/gone/predict?feedback=false", json=POS)
        assert r.status_code == 404


async def test_a_resubscription_is_followed_by_a_full_check(server: RedisServer) -> None:
    """Kill the events connection: redis-py re-subscribes on its own; what was announced
    meanwhile may be lost, so the cache re-reads every cached head once (and is listening
    again after it)."""
    settings = Settings(
        redis_url=server.url, key_prefix=f"t{uuid.uuid4().hex[:8]}", cache_check_s=3600
    )
    client = aioredis.Redis.from_url(server.url)
    try:
        async with running(settings) as (app, c):
            cache = app.state.sl.cache
            await serve(c, ["m"])
            assert await eventually(lambda: _listening(cache))
            full = cache.full_checks
            await client.client_kill_filter(_type="pubsub")

            async def resynced() -> bool:
                return bool(cache.full_checks > full and cache.listening)

            assert await eventually(resynced, timeout=10)
            await asyncio.sleep(0)
    finally:
        await client.aclose()
