"""Feedback learns from the kept features; retries are learned once; ids expire."""

from __future__ import annotations

import asyncio

from service.settings import Settings
from tests.api.conftest import (
    BINARY_SPEC,
    assert_error,
    eventually,
    learn_all,
    running,
    store_metrics,
)

POS = {"features": [1.0, 0.0, 0.0, 0.0]}


async def test_feedback_learns_once_from_kept_features(settings: Settings) -> None:
    async with running(settings) as (_, c):
        assert (await c.put("/models/m", json=BINARY_SPEC)).status_code == 201
        pid = (await c.post("/models/m/predict", json=POS)).json()["prediction_id"]
        fb = {"prediction_id": pid, "label": 1}
        r = await c.post("/models/m/feedback", json=fb)
        assert r.status_code == 202 and r.json() == {"accepted": 1, "prediction_id": pid}
        assert (await c.post("/models/m/feedback", json=fb)).status_code == 202  # a retry
        await learn_all(settings)
        stored = await store_metrics(settings, "m")
        assert stored["appended"] == 1 and stored["examples_seen"] == 1
        # the zero model predicted -1 (margin 0): the feedback +1 was a mistake, then learned
        assert stored["mistakes"] == 1

        async def learned() -> bool:
            return bool((await c.post("/models/m/predict", json=POS)).json()["label"] == 1)

        assert await eventually(learned)


async def test_feedback_errors(settings: Settings) -> None:
    async with running(settings) as (_, c):
        assert (await c.put("/models/m", json=BINARY_SPEC)).status_code == 201
        pid = (await c.post("/models/m/predict", json=POS)).json()["prediction_id"]
        assert_error(
            await c.post("/models/m/feedback", json={"prediction_id": "0" * 32, "label": 1}),
            404,
            "prediction_not_found",
            "prediction_id",
        )
        err = assert_error(
            await c.post("/models/m/feedback", json={"prediction_id": pid, "label": 3}),
            422,
            "invalid_example",
        )
        assert err["field"] == "label"
        assert_error(
            await c.post("/models/m/feedback", json={"label": 1}),
            422,
            "invalid_request",
            "prediction_id",
        )
        assert_error(
            await c.post("/models/other/feedback", json={"prediction_id": pid, "label": 1}),
            404,
            "model_not_found",
        )
    assert (await store_metrics(settings, "m"))["appended"] == 0


async def test_kept_features_expire_per_model(settings: Settings) -> None:
    async with running(settings) as (_, c):
        spec = {**BINARY_SPEC, "feedback_ttl": 1}
        assert (await c.put("/models/m", json=spec)).status_code == 201
        pid = (await c.post("/models/m/predict", json=POS)).json()["prediction_id"]
        await asyncio.sleep(2.1)
        assert_error(
            await c.post("/models/m/feedback", json={"prediction_id": pid, "label": 1}),
            404,
            "prediction_not_found",
            "expired",
        )
