"""Ingest: one example, a batch, NDJSON or svmlight → 202; nothing of a bad batch is appended."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from service.api.batching import SMALL, first_occurrences
from service.api.compute import run_cpu
from service.api.deps import hot, hot_parameters
from service.api.parsing import body_format, parse_examples
from service.api.responses import FastJSON
from service.api.routes.models import ERRORS
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


@router.post(
    "/{m}/examples",
    status_code=202,
    response_model=Accepted,
    responses={**ERRORS, 429: {"model": Accepted}},
    openapi_extra={**INGEST_BODY, "parameters": hot_parameters("json|ndjson|svmlight")},
)
async def post_examples(request: Request) -> FastJSON:
    """Accept labeled examples for learning (202); the model learns them asynchronously."""
    ctx = hot(request, "learn")  # scope check; parameters read without FastAPI's validation
    state, backend, cache, m = ctx.state, ctx.backend, ctx.cache, ctx.m
    kind = body_format(request.headers.get("content-type"), ctx.format)
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
    ids = parsed.ids
    if len(ids) <= SMALL:  # micro-batched with concurrent small requests of this model
        await ctx.batcher.ingest(m, served.featurizer, parsed.examples, ids)
        return FastJSON({"accepted": len(ids), "ids": ids}, status_code=202)
    batch = await run_cpu(len(raw), featurize, served.featurizer, parsed.examples)
    keep = first_occurrences(ids)
    if keep is not None:
        batch = Batch.concat([batch.row(i) for i in keep])
        ids_to_append: list[str | None] = [ids[i] for i in keep]
    else:
        ids_to_append = ids
    await backend.append(m, batch, ids_to_append)
    return FastJSON({"accepted": len(ids), "ids": ids}, status_code=202)
