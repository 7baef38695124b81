"""Redis itself restarts (SIGTERM and SIGKILL) in the middle of appends and learning.

The test starts its own ``redis-server`` (AOF, fsync on every write), a worker subprocess and
an in-process producer appending through :class:`Store`, then restarts Redis several times.
Each append either returns (acknowledged) or raises :class:`StoreUnavailable`; the store's
client must surface exactly that while Redis is down and work again after, without being
rebuilt. Afterwards every acknowledged append is learned exactly once: the committed state is
bit-identical to the in-process run over the acknowledged batches, in order.

An append that raised may still have landed (Redis applied and fsynced it, then died before
the reply): the producer is the only appender and appends one batch at a time, so the
model's ``appended`` counter after recovery tells whether it did; if so it counts as
acknowledged, in its place, and otherwise the producer sends the batch again.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import redis

from service.errors import StoreUnavailable
from service.learning.features import Batch
from service.settings import Settings
from service.store import Store
from service.store.base import parse_id
from tests.redis_servers import RedisServer, redis_server
from tests.store.pipeline_support import (
    WorkerProcess,
    assert_same_state,
    model_spec,
    random_sizes,
    reference_run,
    split,
    synthetic,
    worker_env,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

DIM = 4096
N = 80_000
RESTARTS = 6


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with redis_server() as s:
        yield s


def test_private_server_keeps_acknowledged_writes_across_sigkill(server: RedisServer) -> None:
    """The harness: a write acknowledged before a SIGKILL is there after the restart (AOF
    always), on the same port and data directory."""
    client = redis.Redis.from_url(server.url)
    client.xadd("s", {"f": "1"})
    client.set("k", "v")
    client.close()
    server.restart(signal.SIGKILL)
    client = redis.Redis.from_url(server.url)
    try:
        assert client.xlen("s") == 1 and client.get("k") == b"v"
        assert client.config_get("appendfsync") == {"appendfsync": "always"}
    finally:
        client.close()


async def test_store_surfaces_unavailable_and_recovers(server: RedisServer) -> None:
    """While Redis is down every call raises StoreUnavailable (never a raw redis error) and
    leaks nothing (no pipeline left holding a connection: redis-py reports those as
    'Unclosed Pipeline client' through the loop's exception handler); the same Store works
    again once Redis is back."""
    loop = asyncio.get_running_loop()
    reported: list[str] = []
    loop.set_exception_handler(lambda _loop, ctx: reported.append(str(ctx.get("message"))))
    settings = Settings(redis_url=server.url, key_prefix="t")
    store = Store.open(settings)
    try:
        assert await store.create_model("m", model_spec("pa1", 8))
        lease = await store.acquire("m", "w")
        assert lease is not None
        server.stop(signal.SIGKILL)
        one = Batch.from_rows([([1], [1.0])], [1])
        for call in (
            store.append("m", one),
            store.append_many("m", [(one, None), (one, None)]),
            store.renew([lease]),
            store.metrics("m"),
            store.list_models(),
            store.list_versions("m"),
            store.load_state("m"),
        ):
            with pytest.raises(StoreUnavailable):
                await call
        assert await store.ping() is False
        gc.collect()
        await asyncio.sleep(0)
        assert reported == [], reported
        server.start()
        result = await store.append("m", one)
        assert result.appended == 1
        assert (await store.metrics("m")).appended == 1
        assert await store.ping() is True
    finally:
        loop.set_exception_handler(None)
        await store.close()


async def test_restarts_lose_no_acknowledged_append_and_learn_each_once(
    server: RedisServer, tmp_path: Path
) -> None:
    rng = np.random.default_rng(7)
    settings = Settings(
        redis_url=server.url,
        key_prefix="restart",
        commit_ms=20,
        commit_examples=2_000,
        publish_ms=50,
        block_ms=20,
        read_count=4,
        lease_ttl_ms=1_000,
        heartbeat_ms=100,
    )
    specs = {"pa1": model_spec("pa1", DIM, C=0.5), "avg": model_spec("averaged_perceptron", DIM)}
    batches = {
        m: split(synthetic(N, DIM, 20, seed=30 + i), random_sizes(rng, N, 50, 400))
        for i, m in enumerate(specs)
    }
    store = Store.open(settings)
    worker = WorkerProcess(worker_env(settings, worker_id="restart-w"), tmp_path / "worker.log")
    acked: dict[str, list[tuple[str, Batch]]] = {m: [] for m in specs}
    unavailable = 0
    landed_unacked = 0
    others: list[BaseException] = []
    restarts_done = asyncio.Event()

    async def until_up() -> int:
        while True:
            try:
                return sum([(await store.metrics(m)).appended for m in specs])
            except StoreUnavailable:
                await asyncio.sleep(0.05)

    async def produce(m: str) -> None:
        nonlocal unavailable, landed_unacked
        total = 0
        for b in batches[m]:
            while True:
                try:
                    r = await store.append(m, b)
                except StoreUnavailable:
                    unavailable += 1
                    while True:  # wait for Redis, then: did it land?
                        try:
                            count = (await store.metrics(m)).appended
                            break
                        except StoreUnavailable:
                            await asyncio.sleep(0.05)
                    if count == total + b.n:
                        landed_unacked += 1
                        acked[m].append(("?", b))
                        total = count
                        break
                    assert count == total, f"{m}: appended {count}, acknowledged {total}"
                    continue
                except BaseException as e:  # anything else is a failure of the test
                    others.append(e)
                    raise
                assert r.appended == b.n and r.entry_id
                acked[m].append((r.entry_id, b))
                total += b.n
                break
            if not restarts_done.is_set():
                await asyncio.sleep(0.004)

    async def restart_redis() -> None:
        for k in range(RESTARTS):
            await asyncio.sleep(float(rng.uniform(0.3, 0.8)))
            sig = signal.SIGKILL if k % 2 else signal.SIGTERM
            await asyncio.to_thread(server.stop, sig)
            # The last outage outlasts the worker's lease (TTL 1 s): it comes back to an
            # expired lease that nobody took, and must carry on without a lost update.
            down = 1.6 if k == RESTARTS - 1 else float(rng.uniform(0.2, 0.6))
            await asyncio.sleep(down)
            await asyncio.to_thread(server.start)
        restarts_done.set()

    try:
        for m, spec in specs.items():
            assert await store.create_model(m, spec)
        worker.start()
        await asyncio.gather(restart_redis(), *(produce(m) for m in specs))
        assert not others
        assert unavailable >= 1, "no append ever saw Redis down"
        assert await until_up() == 2 * N

        # Every acknowledged example gets learned, by the same worker process.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            ms = [await store.metrics(m) for m in specs]
            if all(x.lag == 0 and x.examples_seen == N for x in ms):
                break
            await asyncio.sleep(0.1)
        assert worker.alive, worker.tail()
        worker.signal(signal.SIGTERM)
        assert await asyncio.to_thread(worker.wait, 30) == 0, worker.tail()

        for m, spec in specs.items():
            ref = reference_run(spec, acked[m])
            committed = await store.load_state(m)
            metrics = await store.metrics(m)
            assert (metrics.examples_seen, metrics.appended, metrics.lag) == (N, N, 0), metrics
            assert committed.state is not None
            assert_same_state(committed.state, ref.state, f"{m} after {RESTARTS} restarts")
            last_acked = [eid for eid, _ in acked[m] if eid != "?"][-1]
            assert parse_id(committed.cursor) >= parse_id(last_acked)
    finally:
        worker.kill()
        await store.close()
