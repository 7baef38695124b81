"""The FastAPI application: ``create_app(settings)``; nothing connects at import time.

The lifespan owns the Redis client, the :class:`Store`, the in-memory model cache and its two
background tasks (the events listener and the periodic head check). ``create_app_from_env``
is the factory uvicorn calls in each worker process (``streamlearn api --workers N``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from service.api import errors
from service.api.auth import Authenticator, parse_keys, warn_if_open
from service.api.backend import Backend
from service.api.batching import Batcher
from service.api.cache import ModelCache
from service.api.deps import AppState
from service.api.fastpath import FastPath
from service.api.limits import BodyLimit
from service.api.prom import LatencyMiddleware, Metrics
from service.api.responses import FastJSON
from service.api.routes import (
    dashboard,
    dead,
    examples,
    feedback,
    health,
    models,
    monitor,
    predict,
    versions,
)
from service.settings import Settings

log = logging.getLogger("streamlearn.api")

DESCRIPTION = """Streaming online learning: post labeled examples, get predictions from the
newest weights, watch mistakes. See docs/api.md for every endpoint, error and limit."""


def _lifespan(state: AppState) -> Any:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from service.store import Store

        settings = state.settings
        store = Store.open(settings)
        state.backend = Backend(store, settings)
        state.drift = {}
        state.batcher = Batcher(state.backend)

        def forget(m: str) -> None:  # a model left the cache: drop all the process keeps for it
            assert state.batcher is not None and state.drift is not None
            state.batcher.forget(m)
            state.drift.pop(m, None)

        state.cache = ModelCache(
            state.backend,
            default_ttl=settings.feedback_ttl_s,
            check_s=settings.cache_check_s,
            limits={
                "max_features": settings.max_features,
                "max_text_chars": settings.max_text_chars,
            },
            max_bytes=settings.model_cache_bytes,
            on_evict=forget,
            outage=state.outage,
        )
        await store.warm()
        warn_if_open(state.auth)
        # numba and numpy leave millions of long-lived objects behind at import; without this,
        # every full collection walks them all (a stall of a few hundred ms under load).
        gc.collect()
        gc.freeze()
        tasks = state.tasks = [
            asyncio.create_task(state.cache.listen(), name="sl-events"),
            asyncio.create_task(state.cache.check(), name="sl-cache-check"),
        ]
        try:
            yield
        finally:
            state.cache.stopping.set()
            _, pending = await asyncio.wait(tasks, timeout=3.0)
            for t in pending:
                t.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(state.backend.close(), 3.0)

    return lifespan


def _hot_routes() -> dict[str, tuple[Any, Any]]:
    """The APIRoutes of the two hot endpoints (from their routers), by last path segment."""
    out: dict[str, tuple[Any, Any]] = {}
    for tail, module, endpoint in (
        ("examples", examples, examples.post_examples),
        ("predict", predict, predict.post_predict),
    ):
        for route in module.router.routes:
            if getattr(route, "endpoint", None) is endpoint:
                out[tail] = (endpoint, route)
    assert len(out) == 2, "the hot routes moved"
    return out


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app for ``settings`` (defaults from the environment when None)."""
    settings = settings or Settings()
    state = AppState(
        settings=settings, auth=Authenticator(parse_keys(settings.api_keys)), metrics=Metrics()
    )
    app = FastAPI(
        title="streamlearn",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=_lifespan(state),
        default_response_class=FastJSON,
        # our own Prometheus metrics cover requests; FastAPI's OpenTelemetry hooks would
        # otherwise look up the global providers on every request
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.sl = state
    errors.install(app)
    # the hot routes first: the router tries routes in order
    for module in (examples, predict, models, feedback, monitor, versions, dead, health, dashboard):
        app.include_router(module.router)
    app.add_middleware(FastPath, routes=_hot_routes())  # innermost (added first)
    app.add_middleware(
        BodyLimit, max_bytes=settings.max_body_bytes, timeout_s=settings.body_timeout_s
    )
    app.add_middleware(LatencyMiddleware, metrics=state.metrics)
    return app


def create_app_from_env() -> FastAPI:
    """Factory for uvicorn (``factory=True``): settings from ``STREAMLEARN_*``."""
    return create_app(Settings())
