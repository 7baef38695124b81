"""Many models, many concurrent clients, a healthy Redis: not one false 503.

2,000 models and 256 concurrent clients, each ingesting and predicting on models drawn at
random while others scrape ``GET /metrics``, against the real Redis. The connection pool is
bounded (``redis_max_connections``) and blocks briefly when full instead of failing, and
``/metrics`` reads every model in pipelined batches, not one concurrent call per model, so
every answer is a 2xx. (The fuller load, over HTTP, is ``bench/load.py``.)
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest

from service.settings import Settings
from service.store import Store
from tests.api.conftest import BINARY_SPEC, dense, running

MODELS = 2_000
CLIENTS = 256
REQUESTS_PER_CLIENT = 3

pytestmark = pytest.mark.timeout(180)


async def create_models(settings: Settings, n: int) -> list[str]:
    from service.learning.spec import ModelSpec

    spec = ModelSpec.from_dict(BINARY_SPEC).to_dict()
    names = [f"m{i}" for i in range(n)]
    store = Store.open(settings)
    try:
        sem = asyncio.Semaphore(32)

        async def one(m: str) -> None:
            async with sem:
                await store.create_model(m, spec)

        await asyncio.gather(*(one(m) for m in names))
    finally:
        await store.close()
    return names


async def test_2000_models_256_clients_no_false_503(settings: Settings) -> None:
    names = await create_models(settings, MODELS)
    rng = random.Random(0)
    statuses: Counter[int] = Counter()
    bodies: list[str] = []
    async with running(settings) as (_, c):

        async def client(k: int) -> None:
            for j in range(REQUESTS_PER_CLIENT):
                m = rng.choice(names)
                if k % 64 == 0 and j == 0:
                    r = await c.get("/metrics")
                elif (k + j) % 2:
                    r = await c.post(f"/models/{m}/examples", json=dense(k + j))
                else:
                    r = await c.post(f"/models/{m}/predict", json={"features": [1, 0, 0, 1]})
                statuses[r.status_code] += 1
                if r.status_code >= 300:
                    bodies.append(r.text[:200])

        await asyncio.gather(*(client(k) for k in range(CLIENTS)))
        metrics = await c.get("/metrics")
    assert sum(statuses.values()) == CLIENTS * REQUESTS_PER_CLIENT
    assert set(statuses) <= {200, 202}, (statuses, bodies[:3])
    assert metrics.status_code == 200
    # every model is in the exposition (read in batches, not skipped)
    assert metrics.text.count('streamlearn_model_examples_seen{model="') == MODELS
