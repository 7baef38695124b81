"""The exactly-once standard, end to end: clients retrying with ids through the HTTP API,
several workers SIGKILLed and restarted at random, and Redis itself SIGKILLed (AOF, fsync
always) and restarted — all at once.

Each client posts its model's batches in order, every example with an id, and retries the
same body (same ids) on anything but a 202 until it is accepted. A retry of a batch whose
first attempt landed before the answer was lost is deduplicated as a whole (the append and
the ids are one atomic script), so the stream holds every batch exactly once, in the client's
order. Afterwards each model's committed state must be bit-identical to one uninterrupted
in-process run over those batches, and its counters must say every example was learned once.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from service.learning.spec import ModelSpec
from service.settings import Settings
from service.store import Store
from tests.api.conftest import running
from tests.redis_servers import RedisServer
from tests.store.pipeline_support import WorkerProcess, assert_same_state, reference_run, worker_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

DIM = 1024
NNZ = 12
N = 12_000  # examples per model
WORKERS = 3
REDIS_KILLS = 3
SPECS = {
    "pa1": {"algorithm": "pa1", "params": {"C": 0.5}, "hashing": False, "dim": DIM},
    "avg": {"algorithm": "averaged_perceptron", "hashing": False, "dim": DIM},
    "per": {"algorithm": "perceptron", "hashing": False, "dim": DIM},
}


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer() as srv:
        yield srv


def requests_for(m: str, seed: int) -> list[list[dict[str, Any]]]:
    """``N`` examples with ids, cut into request bodies of random sizes."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=DIM)
    out: list[list[dict[str, Any]]] = []
    k = 0
    while k < N:
        size = min(N - k, int(rng.integers(20, 150)))
        body = []
        for _ in range(size):
            idx = rng.choice(DIM, NNZ, replace=False)
            val = np.round(rng.normal(size=NNZ), 3)
            label = 1 if float(w[idx] @ val) > 0 else -1
            feats = {str(int(i)): float(v) for i, v in zip(idx, val, strict=True)}
            body.append({"features": feats, "label": label, "id": f"{m}-{k}"})
            k += 1
        out.append(body)
    return out


async def test_clients_retrying_with_ids_workers_and_redis_killed(
    server: RedisServer, tmp_path: Path
) -> None:
    rnd = random.Random(11)
    settings = Settings(
        redis_url=server.url,
        key_prefix=f"chaos{uuid.uuid4().hex[:6]}",
        commit_ms=10,
        commit_examples=500,
        publish_ms=40,
        block_ms=20,
        read_count=3,
        lease_ttl_ms=600,
        heartbeat_ms=100,
        redis_timeout_s=2.0,
    )
    bodies = {m: requests_for(m, seed) for seed, m in enumerate(SPECS)}
    workers = [
        WorkerProcess(worker_env(settings, worker_id=f"w{i}"), tmp_path / f"w{i}.log")
        for i in range(WORKERS)
    ]
    retries = {"503": 0, "error": 0}
    done = asyncio.Event()
    kills = {"worker": 0, "redis": 0}

    async with running(settings) as (_, c):
        for m, spec in SPECS.items():
            assert (await c.put(f"/models/{m}", json=spec)).status_code == 201
        for w in workers:
            w.start()

        async def client(m: str) -> None:
            for body in bodies[m]:
                while True:
                    try:
                        r = await c.post(f"/models/{m}/examples", json={"examples": body})
                    except Exception:  # the transport failed: retry the same ids
                        retries["error"] += 1
                        await asyncio.sleep(0.05)
                        continue
                    if r.status_code == 202:
                        assert r.json()["accepted"] == len(body)
                        break
                    assert r.status_code in (429, 503), r.text
                    retries["503"] += 1
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.005)

        async def chaos() -> None:
            redis_at = sorted(rnd.sample(range(3, 20), REDIS_KILLS))
            tick = 0
            while not done.is_set():
                await asyncio.sleep(rnd.uniform(0.1, 0.3))
                tick += 1
                if redis_at and tick >= redis_at[0]:
                    redis_at.pop(0)
                    await asyncio.to_thread(server.stop, signal.SIGKILL)
                    kills["redis"] += 1
                    await asyncio.sleep(rnd.uniform(0.2, 0.8))
                    await asyncio.to_thread(server.start)
                    continue
                w = rnd.choice(workers)
                await asyncio.to_thread(w.kill)
                kills["worker"] += 1
                w.start()

        async def clients() -> None:
            try:
                await asyncio.gather(*(client(m) for m in SPECS))
            finally:
                done.set()

        await asyncio.gather(clients(), chaos())

    print(f"kills {kills}, retries {retries}")
    assert kills["redis"] >= 1 and kills["worker"] >= 5, kills
    assert retries["503"] + retries["error"] >= 1, retries
    store = Store.open(settings)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            rows = [await store.metrics(m) for m in SPECS]
            if all(x.lag == 0 and x.examples_seen >= N for x in rows):
                break
            await asyncio.sleep(0.2)
        for w in workers:
            assert w.alive, w.tail()
        for m, spec in SPECS.items():
            model = ModelSpec.from_dict(spec)
            featurizer = model.featurizer()
            stream = [("?", featurizer.transform(body, labels=True)) for body in bodies[m]]
            ref = reference_run(model.to_dict(), stream)
            metrics = await store.metrics(m)
            assert (metrics.examples_seen, metrics.appended, metrics.lag) == (N, N, 0), (
                m,
                metrics,
                retries,
            )
            committed = await store.load_state(m)
            assert committed.state is not None
            assert_same_state(committed.state, ref.state, f"{m} after {kills}")
    finally:
        for w in workers:
            w.kill()
        await store.close()
