"""Micro-batching: concurrent small requests share work, yet each gets its own answer."""

from __future__ import annotations

import asyncio

import httpx

from service.api.coalesce import Coalescer
from service.settings import Settings
from tests.api.conftest import BINARY_SPEC, assert_error, dense, learn_all, running, store_metrics

POS = {"features": [1.0, 0.0, 0.0, 0.0]}


async def test_coalescer_groups_while_a_flush_is_in_flight() -> None:
    seen: list[list[int]] = []

    async def flush(items: list[int]) -> list[int | BaseException]:
        seen.append(items)
        await asyncio.sleep(0.01)
        return [ValueError(f"odd {i}") if i % 2 else i * 10 for i in items]

    co: Coalescer[int, int] = Coalescer(flush)
    results = await asyncio.gather(*(co.submit(i) for i in range(20)), return_exceptions=True)
    assert [r if isinstance(r, int) else str(r) for r in results] == [
        i * 10 if i % 2 == 0 else f"odd {i}" for i in range(20)
    ]
    assert len(seen) < 20 and sum(len(g) for g in seen) == 20
    assert await co.submit(4) == 40 and seen[-1] == [4]  # a lone request goes alone, at once


async def test_a_flush_failure_reaches_every_caller_of_the_group() -> None:
    async def flush(items: list[int]) -> list[int]:
        raise RuntimeError("down")

    co: Coalescer[int, int] = Coalescer(flush)
    results = await asyncio.gather(*(co.submit(i) for i in range(5)), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)


async def test_concurrent_ingest_isolates_the_bad_request(settings: Settings) -> None:
    async with running(settings) as (_, c):
        assert (await c.put("/models/m", json=BINARY_SPEC)).status_code == 201
        good = [{"examples": [dense(i), dense(i + 1)]} for i in range(30)]
        bad = {"examples": [dense(0), {"features": [1, 0, 0, 0], "label": 5}]}
        calls = [c.post("/models/m/examples", json=b) for b in good]
        calls.insert(15, c.post("/models/m/examples", json=bad))
        responses = await asyncio.gather(*calls)
        statuses = [r.status_code for r in responses]
        assert statuses.count(202) == 30
        err = assert_error(responses[15], 422, "invalid_example")
        assert err["index"] == 1 and err["field"] == "label"  # the index within that request
        assert (await store_metrics(settings, "m"))["appended"] == 60
        await learn_all(settings)
        assert (await store_metrics(settings, "m"))["examples_seen"] == 60


async def test_concurrent_predictions_each_get_their_own_answers(api: httpx.AsyncClient) -> None:
    assert (await api.put("/models/m", json=BINARY_SPEC)).status_code == 201
    bodies: list[object] = [POS, {"examples": [POS, POS, POS]}, {"features": [1, 2]}, POS]
    responses = await asyncio.gather(*(api.post("/models/m/predict", json=b) for b in bodies * 5))
    for i, r in enumerate(responses):
        kind = i % 4
        if kind == 2:
            assert_error(r, 422, "invalid_example", "features")
        elif kind == 1:
            assert len(r.json()["predictions"]) == 3
        else:
            assert r.status_code == 200 and "prediction_id" in r.json()
    pids = [
        p["prediction_id"]
        for r in responses
        if r.status_code == 200
        for p in r.json().get("predictions", [r.json()])
    ]
    assert len(set(pids)) == len(pids) == 5 * 5
    fb = await api.post("/models/m/feedback", json={"prediction_id": pids[-1], "label": 1})
    assert fb.status_code == 202
