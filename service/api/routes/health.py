"""Liveness and readiness."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter

from service.api.deps import BackendDep, StateDep
from service.api.errors import error_response
from service.api.responses import FastJSON
from service.api.schemas import ErrorResponse, Health, Ready
from service.errors import StoreUnavailable

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Alive: the process answers (no Redis call)."""
    return Health(status="ok")


@router.get("/readyz", response_model=Ready, responses={503: {"model": ErrorResponse}})
async def readyz(backend: BackendDep, state: StateDep) -> FastJSON:
    """Ready: Redis answers and at least one worker heartbeat is fresh (within the Redis
    timeout as a whole: a hung Redis is "not ready", promptly)."""

    async def probe() -> tuple[bool, int]:
        ok = await backend.ping()
        return ok, (await backend.alive_workers() if ok else 0)

    try:
        redis_ok, workers = await asyncio.wait_for(probe(), state.settings.redis_timeout_s)
    except (TimeoutError, StoreUnavailable):
        redis_ok, workers = False, 0
    if not redis_ok or workers == 0:
        what = "Redis is unreachable" if not redis_ok else "no worker heartbeat seen"
        return error_response(503, "not_ready", f"not ready: {what}")
    return FastJSON({"status": "ready", "redis": True, "workers": workers})
