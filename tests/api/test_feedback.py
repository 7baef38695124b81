"""Feedback learns from the kept features; retries are learned once; ids expire."""

from __future__ import annotations

import asyncio

import httpx
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from service.settings import Settings
from service.store.feedback import parse_prediction_id
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


async def test_feedback_on_one_row_of_a_batch_prediction(settings: Settings) -> None:
    neg = {"features": [0.0, 1.0, 0.0, 0.0]}
    async with running(settings) as (_, c):
        assert (await c.put("/models/m", json=BINARY_SPEC)).status_code == 201
        preds = (await c.post("/models/m/predict", json={"examples": [POS, neg, POS]})).json()
        pids = [p["prediction_id"] for p in preds["predictions"]]
        group = pids[0].rsplit("-", 1)[0]
        assert pids == [f"{group}-{i}" for i in range(3)]
        assert_error(
            await c.post("/models/m/feedback", json={"prediction_id": f"{group}-3", "label": 1}),
            404,
            "prediction_not_found",
        )
        r = await c.post("/models/m/feedback", json={"prediction_id": pids[1], "label": 1})
        assert r.status_code == 202
        await learn_all(settings)

        async def learned_row_1() -> bool:  # the perceptron learned neg's features as +1
            return bool((await c.post("/models/m/predict", json=neg)).json()["label"] == 1)

        assert await eventually(learned_row_1)
        neg_margin = (await c.post("/models/m/predict", json=neg)).json()["margin"]
        pos_margin = (await c.post("/models/m/predict", json=POS)).json()["margin"]
        assert neg_margin > pos_margin  # row 1's features were learned, not row 0's


async def kept_keys(settings: Settings, m: str) -> int:
    from service.store import Keys, connect

    client = connect(settings)
    try:
        pattern = Keys(settings.key_prefix).prediction_pattern(m)
        return len([k async for k in client.scan_iter(match=pattern, count=1000)])
    finally:
        await client.aclose()


async def test_keeping_features_is_an_option_of_the_model_and_the_request(
    settings: Settings,
) -> None:
    async with running(settings) as (_, c):
        assert (await c.put("/models/m", json=BINARY_SPEC)).status_code == 201
        off = {**BINARY_SPEC, "feedback_ttl": 0}
        assert (await c.put("/models/off", json=off)).status_code == 201
        assert (await c.get("/models/off")).json()["feedback_ttl"] == 0
        assert (await c.put("/models/off", json=off)).status_code == 200  # same spec
        # the request says no: nothing kept, no prediction id (small and large batches)
        r = await c.post("/models/m/predict?feedback=false", json=POS)
        assert r.status_code == 200 and r.json()["prediction_id"] is None
        many = await c.post("/models/m/predict?feedback=false", json={"examples": [POS] * 100})
        assert all(p["prediction_id"] is None for p in many.json()["predictions"])
        assert await kept_keys(settings, "m") == 0
        # the model says no: nothing kept, and feedback cannot find anything
        r = await c.post("/models/off/predict", json=POS)
        assert r.status_code == 200 and r.json()["prediction_id"] is None
        assert await kept_keys(settings, "off") == 0
        # by default features are kept, and feedback learns from them
        pid = (await c.post("/models/m/predict", json=POS)).json()["prediction_id"]
        assert isinstance(pid, str) and await kept_keys(settings, "m") == 1
        r = await c.post("/models/m/feedback", json={"prediction_id": pid, "label": 1})
        assert r.status_code == 202
        assert_error(
            await c.post("/models/m/predict?feedback=maybe", json=POS), 422, "invalid_request"
        )


async def test_prediction_ids_are_parsed_strictly(mem_api: httpx.AsyncClient) -> None:
    """Non-ASCII digits (``isdigit()`` accepts '²', ``int()`` refuses it) and other odd ids are
    unknown ids (404), never a 500."""
    assert (await mem_api.put("/models/m", json=BINARY_SPEC)).status_code == 201
    pid = (await mem_api.post("/models/m/predict", json=POS)).json()["prediction_id"]
    group = pid.rpartition("-")[0]
    for bad in (f"{group}-²", f"{group}-٣", f"{group}-{'9' * 50}", f"{group}--1", "-0", "²"):
        r = await mem_api.post("/models/m/feedback", json={"prediction_id": bad, "label": 1})
        assert_error(r, 404, "prediction_not_found")


# any text, and "<group>-<row>" shapes whose row is made of Unicode digits and numbers
# ('²', '٣', '½' …: what str.isdigit and int disagree on)
PIDS = st.one_of(
    st.text(min_size=1, max_size=128),
    st.builds(
        lambda g, r: f"{g}-{r}",
        st.text(min_size=1, max_size=40),
        st.text(st.characters(categories=("Nd", "No")), min_size=1, max_size=12),
    ),
)


@given(pid=PIDS)
@hsettings(max_examples=500, deadline=None)
def test_prediction_id_parsing_fuzz(pid: str) -> None:
    """Any string: parsed to the (group, row) it spells, or refused — never an exception
    (which the API would answer with a 500)."""
    parsed = parse_prediction_id(pid)
    if parsed is not None:
        group, _, row = pid.rpartition("-")
        assert row.isascii() and parsed == (group, int(row))
