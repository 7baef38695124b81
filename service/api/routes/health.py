"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import BackendDep
from service.api.errors import error_response
from service.api.responses import FastJSON
from service.api.schemas import ErrorResponse, Health, Ready

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Alive: the process answers (no Redis call)."""
    return Health(status="ok")


@router.get("/readyz", response_model=Ready, responses={503: {"model": ErrorResponse}})
async def readyz(backend: BackendDep) -> FastJSON:
    """Ready: Redis answers and at least one worker heartbeat is fresh."""
    redis_ok = await backend.ping()
    workers = await backend.alive_workers() if redis_ok else 0
    if not redis_ok or workers == 0:
        what = "Redis is unreachable" if not redis_ok else "no worker heartbeat seen"
        return error_response(503, "not_ready", f"not ready: {what}")
    return FastJSON({"status": "ready", "redis": True, "workers": workers})
