"""Auth through HTTP: 401 without a key, 403 with the wrong scope, both header forms, and
keys never appear in the logs."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from service.settings import Settings
from tests.api.conftest import BINARY_SPEC, assert_error, running

KEYS = "learn-key-123:learn;predict-key-456:predict;admin-key-789:admin"


@pytest.fixture
async def keyed(caplog: pytest.LogCaptureFixture) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(redis_url=f"memory://{uuid.uuid4().hex}", key_prefix="t", api_keys=KEYS)
    with caplog.at_level("DEBUG"):
        async with running(settings) as (_, client):
            yield client
    assert "-key-" not in caplog.text  # no key is ever logged
    assert "OPEN" not in caplog.text  # keys configured: no open-service warning


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_scopes_over_http(keyed: httpx.AsyncClient) -> None:
    c = keyed
    assert_error(await c.put("/models/m", json=BINARY_SPEC), 401, "unauthorized")
    r401 = await c.get("/models", headers=bearer("wrong"))
    assert_error(r401, 401, "unauthorized", "not valid")
    assert r401.headers["www-authenticate"] == "Bearer"
    assert_error(
        await c.put("/models/m", json=BINARY_SPEC, headers=bearer("learn-key-123")),
        403,
        "forbidden",
        "admin",
    )
    assert (
        await c.put("/models/m", json=BINARY_SPEC, headers=bearer("admin-key-789"))
    ).status_code == 201
    example = {"features": [1, 0, 0, 0], "label": 1}
    assert_error(
        await c.post("/models/m/examples", json=example, headers={"X-API-Key": "predict-key-456"}),
        403,
        "forbidden",
        "learn",
    )
    assert_error(
        await c.post("/models/m/predict", json=example, headers={"X-API-Key": "learn-key-123"}),
        403,
        "forbidden",
        "predict",
    )
    ok = await c.post("/models/m/predict", json=example, headers={"X-API-Key": "predict-key-456"})
    assert ok.status_code == 200
    # reads take any valid key; health probes take none
    assert (await c.get("/models/m/metrics", headers=bearer("learn-key-123"))).status_code == 200
    assert_error(await c.get("/models/m/metrics"), 401, "unauthorized")
    assert (await c.get("/healthz")).status_code == 200
    assert_error(
        await c.post("/models/m/rollback", json={"version": 1}, headers=bearer("predict-key-456")),
        403,
        "forbidden",
    )
    assert_error(await c.delete("/models/m", headers=bearer("learn-key-123")), 403, "forbidden")
    assert (await c.delete("/models/m", headers=bearer("admin-key-789"))).status_code == 204
