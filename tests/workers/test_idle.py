"""Workers hold only models with work: idle cost independent of the number of models, idle
models released and woken by their next entry, nothing lost in the hand-off.

The command count runs against a private ``redis-server`` (``INFO commandstats`` then
counts only this test's commands); the rest against the shared Redis, unique prefix.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from service.settings import Settings
from service.store import Store
from tests.redis_servers import RedisServer
from tests.workers.support import append_all, assert_same, batches, reference, spec
from workers.trainer import SWEEP_MODELS, Worker


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer(extra_args=["--appendonly", "no"]) as srv:
        yield srv


async def commands(client: Any) -> int:
    """Commands Redis has run so far (scripts' inner calls included), INFO itself left out."""
    stats = await client.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")


async def until(probe: Any, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await probe():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def idle_cost(server: RedisServer, models: int) -> tuple[int, int]:
    """(Redis commands, heartbeats) of one idle worker over about 20 heartbeats, with
    ``models`` idle models."""
    s = Settings(
        redis_url=server.url,
        key_prefix=f"t{uuid.uuid4().hex[:8]}",
        heartbeat_ms=50,
        block_ms=20,
    )
    client = aioredis.Redis.from_url(server.url)
    store = Store.open(s)
    worker = Worker(s, store, worker_id="w")
    beats = 0
    maintain = worker._maintain

    async def counted() -> None:
        nonlocal beats
        await maintain()
        beats += 1

    worker._maintain = counted  # type: ignore[method-assign]
    try:
        for i in range(models):
            await store.create_model(f"m{i}", spec("perceptron"))
        task = asyncio.create_task(worker.run())

        async def synced() -> bool:
            return beats >= 3 and not worker._resync

        await until(synced)
        first, before = beats, await commands(client)

        async def twenty() -> bool:
            return beats >= first + 20

        await until(twenty)
        spent, counted_beats = await commands(client) - before, beats - first
        worker.stop()
        await asyncio.wait_for(task, 10)
        assert worker.held == {} and worker.stats["takeovers"] == 0
        return spent, counted_beats
    finally:
        await store.close()
        await client.aclose()


async def test_idle_worker_commands_do_not_grow_with_the_models(server: RedisServer) -> None:
    """Per heartbeat an idle worker reads the workers hash, writes its heartbeat and checks
    SWEEP_MODELS models for entries (plus the model list once a minute): a bound that does
    not depend on the number of models. Holding every model, as before, cost one lease
    renewal (three commands) per model per heartbeat."""
    few, few_beats = await idle_cost(server, 3)
    many, many_beats = await idle_cost(server, 300)
    per_beat = SWEEP_MODELS + 4
    assert few <= (few_beats + 1) * per_beat, (few, few_beats)
    assert many <= (many_beats + 1) * per_beat, (many, many_beats)
    assert many < 300 * many_beats  # a renewal per model per beat would be >= 300


async def test_an_idle_model_is_released_and_woken_by_its_next_entry(settings: Settings) -> None:
    """Released after idle_release_s (lease free, learner gone), the model is taken again by
    the work message of its next append and learns each entry once: the same state as one
    uninterrupted run."""
    s = settings.model_copy(update={"idle_release_s": 0.3, "heartbeat_ms": 50})
    store = Store.open(s)
    worker = Worker(s, store, worker_id="w")
    task = asyncio.create_task(worker.run())
    try:
        sp = spec("pa1", C=0.5)
        stream = batches(3000, 31)
        await store.create_model("m", sp)
        await append_all(store, "m", stream[:4])

        async def released() -> bool:
            return (
                worker.stats["released_idle"] >= 1
                and "m" not in worker.held
                and await store.lease_holder("m") is None
                and (await store.metrics("m")).lag == 0
            )

        await until(released)
        await append_all(store, "m", stream[4:])

        async def learned() -> bool:
            m = await store.metrics("m")
            return m.lag == 0 and m.applied == sum(b.n for b in stream)

        await until(learned)
        assert worker.stats["takeovers"] >= 2
        worker.stop()
        await asyncio.wait_for(task, 10)
        committed = await store.load_state("m")
        assert committed.state is not None
        assert_same(committed.state, reference(sp, stream).get_state(), "woken")
    finally:
        worker.stop()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 10)
        await store.close()


async def message(pubsub: Any, seconds: float) -> Any:
    """The next message within ``seconds`` (None if none came); subscribe confirmations are
    skipped."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        got = await pubsub.get_message(timeout=0.05)
        if got is not None:
            return got
    return None


async def test_entries_appended_under_a_lease_are_announced_when_it_is_released(
    settings: Settings,
) -> None:
    """An append to a held model announces nothing (its holder reads it); if the holder lets
    the model go with those entries unread, it announces them itself; an append to a model
    nobody holds is announced by the append."""
    store = Store.open(settings)
    pubsub = store.client.pubsub(ignore_subscribe_messages=True)
    try:
        await store.create_model("m", spec("perceptron"))
        await pubsub.subscribe(store.keys.work("m"))
        stream = batches(600, 32)
        await append_all(store, "m", stream[:1])
        assert await message(pubsub, 2.0) is not None  # nobody held it
        worker = Worker(settings, store, worker_id="w")
        await worker._maintain()  # takes m: it has entries
        assert "m" in worker.held
        await append_all(store, "m", stream[1:])
        assert await message(pubsub, 0.5) is None  # held: nothing announced
        await worker._give_up(worker.held["m"], flush=False)  # nothing read, nothing kept
        assert await message(pubsub, 2.0) is not None
        assert await store.lease_holder("m") is None
    finally:
        await pubsub.aclose()
        await store.close()


async def test_at_the_memory_bound_models_take_turns(settings: Settings) -> None:
    """worker_memory_bytes with room for one model: the worker holds one at a time, lets a
    drained one go when others wait, and every model still learns each entry once."""
    s = settings.model_copy(update={"worker_memory_bytes": 1, "heartbeat_ms": 50})
    store = Store.open(s)
    worker = Worker(s, store, worker_id="w")
    most = 0

    async def watch() -> None:
        nonlocal most
        while True:
            most = max(most, len(worker.held))
            await asyncio.sleep(0.005)

    sp = spec("pa1", C=0.5)
    streams = {f"m{i}": batches(1500, 40 + i) for i in range(3)}
    watcher = asyncio.create_task(watch())
    try:
        for m, stream in streams.items():
            await store.create_model(m, sp)
            await append_all(store, m, stream[:3])
        task = asyncio.create_task(worker.run())
        for m, stream in streams.items():
            await append_all(store, m, stream[3:])

        async def learned() -> bool:
            for m, stream in streams.items():
                got = await store.metrics(m)
                if got.lag or got.applied != sum(b.n for b in stream):
                    return False
            return True

        await until(learned, 60)
        worker.stop()
        await asyncio.wait_for(task, 10)
        assert most == 1 and worker.stats["released_full"] >= 2
        for m, stream in streams.items():
            committed = await store.load_state(m)
            assert committed.state is not None
            assert_same(committed.state, reference(sp, stream).get_state(), m)
    finally:
        watcher.cancel()
        worker.stop()
        await store.close()
