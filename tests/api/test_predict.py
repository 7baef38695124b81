"""Predictions from memory: zero weights before the first version, the cache swapping on a
new version (pushed by the events channel), loading a version once, the answer's shape."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from service.settings import Settings
from tests.api.conftest import BINARY_SPEC, assert_error, dense, learn_all, running

POS = {"features": [1.0, 0.0, 0.0, 0.0]}
NEG = {"features": [0.0, 1.0, 0.0, 0.0]}


async def wait_for_version(
    c: httpx.AsyncClient, m: str, at_least: int, timeout: float = 5.0, body: object = POS
) -> dict:  # type: ignore[type-arg]
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        r = (await c.post(f"/models/{m}/predict", json=body)).json()
        if r["version"] >= at_least or asyncio.get_running_loop().time() > deadline:
            return r  # type: ignore[no-any-return]
        await asyncio.sleep(0.02)


async def test_zero_weights_before_any_version(mem_api: httpx.AsyncClient) -> None:
    assert (await mem_api.put("/models/m", json=BINARY_SPEC)).status_code == 201
    r = await mem_api.post("/models/m/predict", json=POS)
    assert r.status_code == 200
    body = r.json()
    assert body["version"] == 0 and body["margin"] == 0.0 and body["score"] == 0.5
    assert body["label"] in (-1, 1) and re.fullmatch(r"[0-9a-f]{32}-0", body["prediction_id"])


async def test_cache_swaps_on_new_version_without_a_check(settings: Settings) -> None:
    settings.cache_check_s = 3600.0  # the periodic check never runs: only the channel can swap
    async with running(settings) as (app, c):
        assert (await c.put("/models/m", json=BINARY_SPEC)).status_code == 201
        assert (await c.post("/models/m/predict", json=POS)).json()["version"] == 0
        cache = app.state.sl.cache
        loads = cache.loads
        await c.post("/models/m/examples", json={"examples": [dense(i) for i in range(10)]})
        await learn_all(settings)
        got = await wait_for_version(c, "m", 1)
        assert got["version"] >= 1 and got["label"] == 1 and got["margin"] > 0
        neg = (await c.post("/models/m/predict", json=NEG)).json()
        assert neg["label"] == -1 and neg["score"] < 0.5
        after_swap = cache.loads
        assert after_swap > loads
        for _ in range(20):  # serving more predictions loads nothing
            await c.post("/models/m/predict", json=POS)
        assert cache.loads == after_swap


async def test_periodic_check_catches_a_missed_message(settings: Settings) -> None:
    settings.cache_check_s = 0.1
    async with running(settings) as (app, c):
        assert (await c.put("/models/m", json=BINARY_SPEC)).status_code == 201
        assert (await c.post("/models/m/predict", json=POS)).json()["version"] == 0
        listener = next(t for t in app.state.sl.tasks if t.get_name() == "sl-events")
        listener.cancel()  # every events message is now missed
        await asyncio.sleep(0.05)
        assert listener.done()
        await c.post("/models/m/examples", json={"examples": [dense(i) for i in range(10)]})
        await learn_all(settings)
        assert (await wait_for_version(c, "m", 1))["version"] >= 1


async def test_batch_and_query_string_predictions(settings: Settings) -> None:
    async with running(settings) as (_, c):
        spec = {"algorithm": "perceptron", "classes": ["ham", "spam"], "text": {}}
        assert (await c.put("/models/t", json=spec)).status_code == 201
        train = [
            {"text": "cheap pills win money", "label": "spam"},
            {"text": "meeting at noon", "label": "ham"},
        ]
        await c.post("/models/t/examples", json={"examples": train * 5})
        await learn_all(settings)
        await wait_for_version(c, "t", 1, body={"text": "x"})
        r = await c.post(
            "/models/t/predict",
            json={"examples": [{"text": "win money"}, {"text": "noon meeting"}]},
        )
        assert r.status_code == 200
        preds = r.json()["predictions"]
        assert [p["label"] for p in preds] == ["spam", "ham"]
        assert all(0.0 <= p["score"] <= 1.0 for p in preds)
        assert len({p["prediction_id"] for p in preds}) == 2
        q = await c.get("/models/t/predict", params={"text": "cheap pills"})
        assert q.status_code == 200 and q.json()["label"] == "spam"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"features": [1, 0]}, 422, "invalid_example"),
        ({"examples": [POS, {"features": "x"}]}, 422, "invalid_example"),
        ({"examples": []}, 422, "invalid_example"),
    ],
)
async def test_predict_errors(
    mem_api: httpx.AsyncClient, body: object, status: int, code: str
) -> None:
    assert (await mem_api.put("/models/m", json=BINARY_SPEC)).status_code == 201
    assert_error(await mem_api.post("/models/m/predict", json=body), status, code)


async def test_predict_unknown_model_is_404(mem_api: httpx.AsyncClient) -> None:
    assert_error(await mem_api.post("/models/zz/predict", json=POS), 404, "model_not_found", "zz")
    assert_error(
        await mem_api.get("/models/zz/predict", params={"text": "a"}), 404, "model_not_found"
    )
    assert_error(await mem_api.get("/models/zz/predict"), 422, "invalid_request", "text")


async def test_a_recreated_model_is_served_with_its_new_spec(settings: Settings) -> None:
    async with running(settings) as (_, c):
        assert (await c.put("/models/m", json=BINARY_SPEC)).status_code == 201
        await c.post("/models/m/examples", json={"examples": [dense(i) for i in range(10)]})
        await learn_all(settings)
        assert (await wait_for_version(c, "m", 1))["version"] >= 1
        assert (await c.delete("/models/m")).status_code == 204
        spec = {"algorithm": "perceptron", "hashing": False, "dim": 2, "classes": ["a", "b"]}
        assert (await c.put("/models/m", json=spec)).status_code == 201
        r = await c.post("/models/m/predict", json={"features": [1.0, 0.0]})
        assert r.status_code == 200 and r.json()["version"] == 0 and r.json()["label"] in ("a", "b")
