"""Dependencies, as ``Annotated`` aliases: the app state and the scope checks."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Header, Request

from service.api.auth import READ, Authenticator, presented_key
from service.api.backend import Backend
from service.api.cache import ModelCache
from service.api.drift import DriftTracker
from service.api.prom import Metrics
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


def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.sl
    return state


def get_backend(request: Request) -> Backend:
    backend = get_state(request).backend
    assert backend is not None, "the lifespan has not run"
    return backend


def get_cache(request: Request) -> ModelCache:
    cache = get_state(request).cache
    assert cache is not None, "the lifespan has not run"
    return cache


StateDep = Annotated[AppState, Depends(get_state)]
BackendDep = Annotated[Backend, Depends(get_backend)]
CacheDep = Annotated[ModelCache, Depends(get_cache)]


def require(scope: str) -> Any:
    """A dependency that lets the request through only with a key carrying ``scope``."""

    def check(
        request: Request,
        authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
        x_api_key: Annotated[str | None, Header(include_in_schema=False)] = None,
    ) -> None:
        get_state(request).auth.check(presented_key(authorization, x_api_key), scope)

    return Depends(check)


Learn = require("learn")
Predict = require("predict")
Admin = require("admin")
Read = require(READ)
