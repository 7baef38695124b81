"""Models: create or describe (PUT), list, describe, delete."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Path, Request, Response

from service.api.deps import Admin, BackendDep, CacheDep, Read
from service.api.parsing import media_type
from service.api.schemas import ErrorResponse, ModelInfo, ModelList
from service.errors import InvalidSpec, MalformedBody, UnsupportedMediaType
from service.learning.spec import ModelSpec

router = APIRouter(prefix="/models", tags=["models"])

ModelName = Annotated[str, Path(description="model name: letters, digits, '_', '.', '-'")]

MAX_TTL_S = 365 * 24 * 3600

SPEC_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "additionalProperties": True,
                    "properties": {
                        "algorithm": {"type": "string"},
                        "params": {"type": "object"},
                        "bits": {"type": "integer"},
                        "dim": {"type": "integer"},
                        "hashing": {"type": "boolean"},
                        "classes": {"type": "array"},
                        "positive": {},
                        "text": {"type": "object"},
                        "preset": {"type": "string"},
                        "feedback_ttl": {"type": "integer", "minimum": 0},
                    },
                },
                "example": {"algorithm": "pa1", "params": {"C": 1.0}, "bits": 18},
            }
        },
    }
}

ERRORS: dict[int | str, dict[str, Any]] = {
    s: {"model": ErrorResponse} for s in (400, 401, 403, 404, 409, 413, 415, 422, 503)
}


def parse_feedback_ttl(body: dict[str, Any]) -> int | None:
    """``feedback_ttl`` (seconds) is the API's own part of a spec: pop and check it.
    0 means predictions of the model keep nothing for feedback."""
    ttl = body.pop("feedback_ttl", None)
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 <= ttl <= MAX_TTL_S:
        raise InvalidSpec(
            f"feedback_ttl must be an integer number of seconds in [0, {MAX_TTL_S}] "
            f"(0: keep nothing for feedback), got {ttl!r}",
            field="feedback_ttl",
        )
    return ttl


async def read_spec(request: Request) -> tuple[ModelSpec, int | None, dict[str, Any]]:
    """The spec of a PUT, its feedback TTL, and the body as sent (less ``feedback_ttl``)."""
    mt = media_type(request.headers.get("content-type"))
    if mt not in ("application/json", "") and not mt.endswith("+json"):
        raise UnsupportedMediaType(
            f"a model spec is JSON, got content type {mt!r}", field="content-type"
        )
    raw = await request.body()
    try:
        body = orjson.loads(raw) if raw.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise MalformedBody(f"the spec is not valid JSON: {exc}", field="body") from exc
    if not isinstance(body, dict):
        raise InvalidSpec(
            f"the spec must be a JSON object, got {type(body).__name__}", field="body"
        )
    ttl = parse_feedback_ttl(body)
    return ModelSpec.from_dict(body), ttl, body


@router.put(
    "/{m}",
    response_model=ModelInfo,
    status_code=201,
    responses={200: {"model": ModelInfo, "description": "exists with this spec"}, **ERRORS},
    openapi_extra=SPEC_BODY,
    dependencies=[Admin],
)
async def put_model(
    m: ModelName, request: Request, response: Response, backend: BackendDep
) -> ModelInfo:
    """Create a model (201), or describe it when it exists with the same spec (200)."""
    spec, ttl, given = await read_spec(request)
    created = await backend.create_model(m, spec, ttl, given)
    if not created:
        response.status_code = 200
    return ModelInfo(**await backend.describe(m))


@router.get("", response_model=ModelList, responses=ERRORS, dependencies=[Read])
async def list_models(backend: BackendDep) -> ModelList:
    """List the model names."""
    return ModelList(models=sorted(await backend.list_models()))


@router.get("/{m}", response_model=ModelInfo, responses=ERRORS, dependencies=[Read])
async def get_model(m: ModelName, backend: BackendDep) -> ModelInfo:
    """Describe a model: its canonical spec, feedback expiry and head version."""
    return ModelInfo(**await backend.describe(m))


@router.delete("/{m}", status_code=204, responses=ERRORS, dependencies=[Admin])
async def delete_model(m: ModelName, backend: BackendDep, cache: CacheDep) -> Response:
    """Delete a model: spec, stream, state, versions and kept predictions."""
    await backend.delete_model(m)
    cache.evict(m)
    return Response(status_code=204)
