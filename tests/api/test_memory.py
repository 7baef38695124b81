"""Memory a client cannot grow: requests to unknown models leave nothing behind, and the model
cache is bounded by the estimated bytes of the weights it holds (LRU by last use)."""

from __future__ import annotations

from typing import Any

import httpx

from service.settings import Settings
from tests.api.conftest import eventually, running

SPEC: dict[str, Any] = {"algorithm": "perceptron", "hashing": False, "dim": 1000}
BYTES_PER_MODEL = 1000 * 8 + 8  # W float64 (dim,) and the bias


def per_model_state(app: Any) -> dict[str, int]:
    """Sizes of every per-model structure of the API process."""
    st = app.state.sl
    return {
        "entries": len(st.cache.entries),
        "locks": len(st.cache._locks),
        "drift": len(st.drift),
        "ingest_queues": len(st.batcher._ingest),
        "predict_queues": len(st.batcher._predict),
    }


async def test_unknown_models_leave_nothing_behind(mem_settings: Settings) -> None:
    async with running(mem_settings) as (app, c):
        for i in range(200):
            m = f"nobody{i}"
            for r in (
                await c.post(f"/models/{m}/predict", json={"features": [1.0]}),
                await c.post(f"/models/{m}/examples", json={"features": [1.0], "label": 1}),
                await c.post(f"/models/{m}/feedback", json={"prediction_id": "a-0", "label": 1}),
                await c.get(f"/models/{m}/predict", params={"text": "x"}),
                await c.get(f"/models/{m}/metrics"),
                await c.get(f"/models/{m}/history"),
            ):
                assert r.status_code == 404, r.text
        assert per_model_state(app) == dict.fromkeys(per_model_state(app), 0)


async def predict(c: httpx.AsyncClient, m: str) -> None:
    r = await c.post(f"/models/{m}/predict", json={"features": {"0": 1.0}})
    assert r.status_code == 200, r.text


async def test_the_model_cache_is_bounded_by_bytes_lru(mem_settings: Settings) -> None:
    settings = mem_settings.model_copy(update={"model_cache_bytes": 3 * BYTES_PER_MODEL})
    async with running(settings) as (app, c):
        cache = app.state.sl.cache
        for m in ("a", "b", "c", "d", "e"):
            assert (await c.put(f"/models/{m}", json=SPEC)).status_code == 201
        for m in ("a", "b", "c"):
            await predict(c, m)
        assert set(cache.entries) == {"a", "b", "c"}
        await predict(c, "a")  # a is now the most recently used
        await predict(c, "d")  # over the bound: the least recently used (b) goes
        assert set(cache.entries) == {"a", "c", "d"}
        assert cache.bytes <= 3 * BYTES_PER_MODEL
        await predict(c, "e")
        assert set(cache.entries) == {"a", "d", "e"}
        # per-model structures of evicted models go too
        state = per_model_state(app)
        assert state["predict_queues"] <= 3 and state["locks"] <= 3
        # what serving costs is reported
        text = (await c.get("/metrics")).text
        assert "streamlearn_cache_models 3\n" in text
        assert f"streamlearn_cache_bytes {3 * BYTES_PER_MODEL}\n" in text
        assert f"streamlearn_cache_max_bytes {3 * BYTES_PER_MODEL}\n" in text
        assert "streamlearn_cache_evictions_total 2\n" in text
        from prometheus_client.parser import text_string_to_metric_families

        families = {f.name for f in text_string_to_metric_families(text)}  # valid exposition
        assert {"streamlearn_cache_models", "streamlearn_cache_evictions"} <= families
        # an evicted model is simply loaded again on its next use
        loads = cache.loads
        await predict(c, "b")
        assert cache.loads == loads + 1 and "b" in cache.entries


async def test_a_model_deleted_elsewhere_leaves_the_cache(mem_settings: Settings) -> None:
    """The periodic check (pipelined over every cached model) notices a deletion made through
    another API process and evicts the model: its predictions become 404s."""
    async with running(mem_settings) as (app, a), running(mem_settings) as (_, b):
        assert (await a.put("/models/gone", json=SPEC)).status_code == 201
        assert (await a.put("/models/kept", json=SPEC)).status_code == 201
        await predict(a, "gone")
        await predict(a, "kept")
        assert (await b.delete("/models/gone")).status_code == 204

        async def evicted() -> bool:
            return "gone" not in app.state.sl.cache.entries

        assert await eventually(evicted)
        assert (
            await a.post("/models/gone/predict", json={"features": {"0": 1.0}})
        ).status_code == 404
        assert "kept" in app.state.sl.cache.entries
