"""API test fixtures: an app with its lifespan running, and an httpx client over ASGI.

``api`` runs against the real Redis (the ``settings`` fixture: unique key prefix) for tests
that touch streams and scripts; ``mem_api`` runs on in-process fakeredis (``memory://``) for
tests where Redis semantics do not matter.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from service.settings import Settings


@contextlib.asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    """The app for ``settings`` with its lifespan entered, and a client talking to it."""
    from service.api.app import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield app, client


@pytest.fixture
def mem_settings() -> Settings:
    return Settings(redis_url=f"memory://{uuid.uuid4().hex}", key_prefix="t", cache_check_s=0.2)


@pytest.fixture
async def mem_api(mem_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with running(mem_settings) as (_, client):
        yield client


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    settings.cache_check_s = 0.2
    async with running(settings) as (_, client):
        yield client


def assert_error(resp: httpx.Response, status: int, code: str, *fragments: str) -> dict[str, Any]:
    """The response is the JSON error shape with this status and code, naming ``fragments``."""
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"}, body
    err = body["error"]
    assert err["code"] == code, err
    for frag in fragments:
        assert frag in err["message"], (frag, err["message"])
    return dict(err)


BINARY_SPEC: dict[str, Any] = {"algorithm": "perceptron", "hashing": False, "dim": 4}


def dense(i: int) -> dict[str, Any]:
    """A linearly separable toy example: +1 on feature 0, -1 on feature 1."""
    if i % 2:
        return {"features": [1.0, 0.0, 0.0, 1.0], "label": 1}
    return {"features": [0.0, 1.0, 0.0, 1.0], "label": -1}


async def learn_all(settings: Settings) -> None:
    """Run one worker in burst mode until every model is caught up."""
    from service.store import Store
    from workers.trainer import Worker

    store = Store.open(settings)
    try:
        await Worker(settings, store).run(burst=True)
    finally:
        await store.close()


async def store_metrics(settings: Settings, m: str) -> dict[str, Any]:
    """The store's own view of ``m`` (appended, applied, counters), bypassing the API."""
    from service.store import Store

    store = Store.open(settings)
    try:
        return (await store.metrics(m)).as_dict()
    finally:
        await store.close()


async def eventually(probe: Any, timeout: float = 5.0) -> Any:
    """Await ``probe()`` until it returns something truthy (the cache swap is asynchronous)."""
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        got = await probe()
        if got or loop.time() > deadline:
            return got
        await asyncio.sleep(0.02)
