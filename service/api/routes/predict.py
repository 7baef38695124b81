"""Predictions from the in-memory head version: no Redis read on this path.

The only Redis traffic is one pipelined write that keeps each prediction's features for
feedback (with the model's TTL) — none at all when the model's ``feedback_ttl`` is 0 or the
request says ``?feedback=false``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from service.api.batching import Batcher, read_json
from service.api.cache import ModelCache
from service.api.compute import run_cpu
from service.api.deps import CacheDep, Predict, StateDep, hot, hot_parameters
from service.api.parsing import body_format, parse_examples
from service.api.responses import FastJSON
from service.api.routes.models import ERRORS, ModelName
from service.api.schemas import Prediction, Predictions
from service.errors import InvalidRequest

router = APIRouter(prefix="/models", tags=["predict"])

PREDICT_BODY: dict[str, Any] = {
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
                "example": {"text": "win money now"},
            },
            "application/x-ndjson": {"schema": {"type": "string"}},
        },
    }
}


FEEDBACK_FLAGS = {"true": True, "1": True, "false": False, "0": False}


def feedback_flag(raw: str | None) -> bool:
    """``?feedback=`` (default true): whether to keep this request's features for feedback."""
    if raw is None:
        return True
    flag = FEEDBACK_FLAGS.get(raw.lower())
    if flag is None:
        raise InvalidRequest(f"feedback must be true or false, got {raw[:40]!r}", field="feedback")
    return flag


async def predict_examples(
    m: str, examples: list[Any], size: int, cache: ModelCache, batcher: Batcher, feedback: bool
) -> list[dict[str, Any]]:
    served = await cache.get(m)
    return await batcher.predict(m, served, examples, feedback and served.feedback_ttl > 0, size)


@router.post(
    "/{m}/predict",
    response_model=Prediction | Predictions,
    responses=ERRORS,
    openapi_extra={
        **PREDICT_BODY,
        "parameters": [
            *hot_parameters("json|ndjson|svmlight"),
            {
                "name": "feedback",
                "in": "query",
                "required": False,
                "schema": {"type": "boolean", "default": True},
                "description": "keep the features for feedback (when the model's feedback_ttl "
                "is > 0); false: nothing is kept and prediction_id is null",
            },
        ],
    },
)
async def post_predict(request: Request) -> FastJSON:
    """Predict one example (one answer) or a batch (``{"predictions": [...]}``)."""
    ctx = hot(request, "predict")  # scope check; parameters read without FastAPI's validation
    feedback = feedback_flag(request.query_params.get("feedback"))
    kind = body_format(request.headers.get("content-type"), ctx.format)
    raw = await request.body()
    max_batch = ctx.state.settings.max_batch
    served = await ctx.cache.get(ctx.m)
    fast = await run_cpu(
        len(raw), read_json, served.featurizer, raw, kind, labels=False, max_batch=max_batch
    )
    if fast is not None:  # a big JSON batch, parsed and featurized in one compiled pass
        keep = feedback and served.feedback_ttl > 0
        out = await ctx.batcher.predict_batch(ctx.m, served, fast[0], keep)
        return FastJSON({"predictions": out})
    parsed = parse_examples(raw, kind, max_batch=max_batch)
    out = await predict_examples(ctx.m, parsed.examples, len(raw), ctx.cache, ctx.batcher, feedback)
    if parsed.single:
        return FastJSON(out[0])
    return FastJSON({"predictions": out})


@router.get("/{m}/predict", response_model=Prediction, responses=ERRORS, dependencies=[Predict])
async def get_predict(
    m: ModelName,
    state: StateDep,
    cache: CacheDep,
    text: Annotated[str, Query(description="the text to score")],
    feedback: Annotated[
        bool, Query(description="keep the features for feedback (if the model keeps any)")
    ] = True,
) -> FastJSON:
    """Predict one text given in the query string (a quick look)."""
    assert state.batcher is not None  # the featurizer refuses a text over max_text_chars
    out = await predict_examples(m, [{"text": text}], len(text), cache, state.batcher, feedback)
    return FastJSON(out[0])
