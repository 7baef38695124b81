"""Ingest: one example, a batch, NDJSON or svmlight → 202; nothing of a bad batch is appended."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from service.api.compute import run_cpu
from service.api.deps import Learn, app_state
from service.api.parsing import body_format, parse_examples
from service.api.responses import FastJSON
from service.api.routes.models import ERRORS, ModelName
from service.api.schemas import Accepted
from service.learning.features import Batch

router = APIRouter(prefix="/models", tags=["examples"])

INGEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "oneOf": [
                        {"$ref": "#/components/schemas/Example"},
                        {"$ref": "#/components/schemas/ExampleBatch"},
                    ]
                },
                "example": {"examples": [{"text": "win money now", "label": 1, "id": "m-1"}]},
            },
            "application/x-ndjson": {"schema": {"type": "string"}},
            "text/x-svmlight": {"schema": {"type": "string"}},
        },
    }
}


def featurize(featurizer: Any, examples: list[Any]) -> Batch:
    batch: Batch = featurizer.transform(examples, labels=True)
    return batch


def first_occurrences(ids: list[str | None]) -> list[int] | None:
    """Rows to keep when the same id repeats inside one batch (learned once), else None."""
    seen: set[str] = set()
    keep: list[int] = []
    for i, ident in enumerate(ids):
        if ident is not None:
            if ident in seen:
                continue
            seen.add(ident)
        keep.append(i)
    return keep if len(keep) < len(ids) else None


@router.post(
    "/{m}/examples",
    status_code=202,
    response_model=Accepted,
    responses={**ERRORS, 429: {"model": Accepted}},
    openapi_extra=INGEST_BODY,
    dependencies=[Learn],
)
async def post_examples(
    m: ModelName,
    request: Request,
    format: Annotated[str | None, Query(description="json | ndjson | svmlight")] = None,
) -> FastJSON:
    """Accept labeled examples for learning (202); the model learns them asynchronously."""
    # the hot path takes the app state from the request: each declared dependency costs
    state = app_state(request)
    backend, cache = state.backend, state.cache
    assert backend is not None and cache is not None
    kind = body_format(request.headers.get("content-type"), format)
    served = await cache.get(m)  # 404 before reading a body for an unknown model
    raw = await request.body()
    settings = state.settings
    parsed = await run_cpu(
        len(raw),
        parse_examples,
        raw,
        kind,
        max_batch=settings.max_batch,
        max_text_chars=settings.max_text_chars,
        max_features=settings.max_features,
    )
    batch = await run_cpu(len(raw), featurize, served.featurizer, parsed.examples)
    ids = parsed.ids
    keep = first_occurrences(ids)
    if keep is not None:
        batch = Batch.concat([batch.row(i) for i in keep])
        ids_to_append: list[str | None] = [ids[i] for i in keep]
    else:
        ids_to_append = ids
    await backend.append(m, batch, ids_to_append)
    return FastJSON({"accepted": len(ids), "ids": ids}, status_code=202)
