"""Versions: list, one version as JSON and .npy, pin and rollback (admin), 404s."""

from __future__ import annotations

import asyncio
import io

import httpx
import numpy as np
import pytest

from service.settings import Settings
from tests.api.conftest import BINARY_SPEC, assert_error, dense, learn_all

POS = {"features": [1.0, 0.0, 0.0, 0.0]}


@pytest.fixture
async def learned(api: httpx.AsyncClient, settings: Settings) -> httpx.AsyncClient:
    assert (await api.put("/models/m", json=BINARY_SPEC)).status_code == 201
    await api.post("/models/m/examples", json={"examples": [dense(i) for i in range(10)]})
    await learn_all(settings)
    return api


async def test_list_and_get(learned: httpx.AsyncClient) -> None:
    listing = (await learned.get("/models/m/versions")).json()
    assert listing["head"] >= 1
    top = listing["versions"][0]
    assert top["version"] == listing["head"] and top["head"] is True
    assert top["examples_seen"] == 10
    one = (await learned.get(f"/models/m/versions/{top['version']}")).json()
    w = one["weights"]
    dense_w = np.zeros(w["shape"])
    dense_w.ravel()[w["indices"]] = w["values"]
    npy = await learned.get(f"/models/m/versions/{top['version']}", params={"format": "npy"})
    assert npy.status_code == 200 and npy.headers["content-type"] == "application/octet-stream"
    assert np.array_equal(np.load(io.BytesIO(npy.content)), dense_w)
    assert dense_w[0] > 0 > dense_w[1]
    assert_error(await learned.get("/models/m/versions/999"), 404, "version_not_found", "999")
    assert_error(await learned.get("/models/zz/versions/1"), 404, "model_not_found")
    assert_error(await learned.get("/models/zz/versions"), 404, "model_not_found")
    assert_error(
        await learned.get("/models/m/versions/1", params={"format": "csv"}),
        422,
        "invalid_request",
        "format",
    )


async def test_rollback_and_pin_move_the_served_version(learned: httpx.AsyncClient) -> None:
    head = (await learned.get("/models/m/versions")).json()["head"]
    r = await learned.post("/models/m/rollback", json={"version": head})
    assert r.status_code == 200
    new_head = r.json()["head"]
    assert new_head == head + 1
    assert r.json()["versions"][0]["source"] == f"rollback:{head}"
    await asyncio.sleep(0.05)
    assert (await learned.post("/models/m/predict", json=POS)).json()["version"] == new_head
    pinned = await learned.post("/models/m/pin", json={"version": head})
    assert pinned.status_code == 200 and pinned.json()["head"] == head
    assert (await learned.post("/models/m/predict", json=POS)).json()["version"] == head
    unpinned = await learned.delete("/models/m/pin")
    assert unpinned.status_code == 200
    assert_error(
        await learned.post("/models/m/pin", json={"version": 77}), 404, "version_not_found"
    )
    assert_error(
        await learned.post("/models/m/rollback", json={"version": 77}), 404, "version_not_found"
    )
    assert_error(
        await learned.post("/models/m/rollback", json={"version": 0}),
        422,
        "invalid_request",
        "version",
    )
    assert_error(await learned.post("/models/zz/pin", json={"version": 1}), 404, "model_not_found")
