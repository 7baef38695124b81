"""Dead letters: the stream entries a worker could not decode or learn, and why."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from service.api.deps import BackendDep, Read
from service.api.responses import FastJSON
from service.api.routes.models import ERRORS, ModelName
from service.api.schemas import DeadLetters

router = APIRouter(prefix="/models", tags=["models"])


@router.get("/{m}/dead-letters", response_model=DeadLetters, responses=ERRORS, dependencies=[Read])
async def dead_letters(
    m: ModelName,
    backend: BackendDep,
    limit: Annotated[int, Query(ge=1, le=10_000, description="newest N")] = 100,
) -> FastJSON:
    """The newest dead letters of a model (newest first): the entry, the reason, the size."""
    return FastJSON({"dead_letters": await backend.dead_letters(m, limit)})
