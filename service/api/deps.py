"""Dependencies, as ``Annotated`` aliases: the app state and the scope checks."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request

from service.api.auth import READ, Authenticator, presented_key
from service.api.backend import Backend
from service.api.batching import Batcher
from service.api.cache import ModelCache
from service.api.drift import DriftTracker
from service.api.prom import Metrics
from service.outage import Outage
from service.settings import Settings


@dataclass(slots=True)
class AppState:
    """What the lifespan builds and every request uses (one per process)."""

    settings: Settings
    auth: Authenticator
    metrics: Metrics
    backend: Backend | None = None
    cache: ModelCache | None = None
    drift: dict[str, DriftTracker] | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    batcher: Batcher | None = None
    outage: Outage = field(
        default_factory=lambda: Outage(logging.getLogger("streamlearn.api"), "API")
    )


def app_state(request: Request) -> AppState:
    state: AppState = request.app.state.sl
    return state


async def get_state(request: Request) -> AppState:
    """(Dependencies are ``async def``: FastAPI runs plain ``def`` ones in a thread pool.)"""
    return app_state(request)


async def get_backend(request: Request) -> Backend:
    backend = app_state(request).backend
    assert backend is not None, "the lifespan has not run"
    return backend


async def get_cache(request: Request) -> ModelCache:
    cache = app_state(request).cache
    assert cache is not None, "the lifespan has not run"
    return cache


StateDep = Annotated[AppState, Depends(get_state)]
BackendDep = Annotated[Backend, Depends(get_backend)]
CacheDep = Annotated[ModelCache, Depends(get_cache)]


def require(scope: str) -> Any:
    """A dependency that lets the request through only with a key carrying ``scope``."""

    async def check(request: Request) -> None:
        # headers read directly: declared Header parameters cost a validation pass each
        headers = request.headers
        key = presented_key(headers.get("authorization"), headers.get("x-api-key"))
        app_state(request).auth.check(key, scope)

    return Depends(check)


Learn = require("learn")
Predict = require("predict")
Admin = require("admin")
Read = require(READ)


# --- the two hot routes (ingest, predict) ------------------------------------------------------
# FastAPI validates each declared parameter and dependency per request (~60 µs of a ~250 µs
# request here), so the hot handlers take only the Request and read the rest themselves; the
# parameters are documented in OpenAPI by hand (`hot_parameters`).


@dataclass(slots=True)
class Hot:
    state: AppState
    backend: Backend
    cache: ModelCache
    batcher: Batcher
    m: str
    format: str | None


def hot(request: Request, scope: str) -> Hot:
    """Auth for ``scope`` plus everything a hot handler needs, without dependency resolution."""
    state = app_state(request)
    headers = request.headers
    state.auth.check(presented_key(headers.get("authorization"), headers.get("x-api-key")), scope)
    backend, cache, batcher = state.backend, state.cache, state.batcher
    assert backend is not None and cache is not None and batcher is not None, "no lifespan"
    path_m, fmt = request.path_params["m"], request.query_params.get("format")
    return Hot(state, backend, cache, batcher, path_m, fmt)


def hot_parameters(formats: str) -> list[dict[str, Any]]:
    return [
        {
            "name": "m",
            "in": "path",
            "required": True,
            "schema": {"type": "string"},
            "description": "model name: letters, digits, '_', '.', '-'",
        },
        {
            "name": "format",
            "in": "query",
            "required": False,
            "schema": {"type": "string", "enum": formats.split("|")},
            "description": f"body format ({formats}) when the content type is text/plain",
        },
    ]
