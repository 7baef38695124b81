"""Predictions from the in-memory head version: no Redis read on this path.

The only Redis traffic is one pipelined write that keeps each prediction's features for
feedback (with the model's TTL) — none at all when the model's ``feedback_ttl`` is 0 or the
request says ``?feedback=false``.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from service.api.backend import Backend
from service.api.batching import SMALL, Batcher, answers
from service.api.cache import ModelCache, Served
from service.api.compute import run_cpu
from service.api.deps import BackendDep, CacheDep, Predict, StateDep, hot, hot_parameters
from service.api.parsing import body_format, parse_examples
from service.api.responses import FastJSON
from service.api.routes.models import ERRORS, ModelName
from service.api.schemas import Prediction, Predictions
from service.errors import InvalidRequest, PayloadTooLarge
from service.learning.batch import Batch

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


def score(
    served: Served, examples: list[Any], group: str | None
) -> tuple[Batch, list[dict[str, Any]]]:
    """Featurize and score a batch; one answer per example."""
    batch: Batch = served.featurizer.transform(examples, labels=False)
    return batch, answers(served, batch, group)


async def predict_examples(
    m: str,
    examples: list[Any],
    size: int,
    backend: Backend,
    cache: ModelCache,
    batcher: Batcher,
    feedback: bool = True,
) -> list[dict[str, Any]]:
    served = await cache.get(m)
    keep = feedback and served.feedback_ttl > 0
    if len(examples) <= SMALL:  # micro-batched with concurrent small requests of this model
        return await batcher.predict(m, served, examples, keep)
    group = uuid.uuid4().hex if keep else None
    batch, scored = await run_cpu(size, score, served, examples, group)
    if group is not None:
        await backend.keep([(m, group, batch, served.feedback_ttl)])
    return scored


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
    state, backend, cache, m = ctx.state, ctx.backend, ctx.cache, ctx.m
    feedback = feedback_flag(request.query_params.get("feedback"))
    kind = body_format(request.headers.get("content-type"), ctx.format)
    raw = await request.body()
    s = state.settings
    parsed = parse_examples(
        raw,
        kind,
        max_batch=s.max_batch,
        max_text_chars=s.max_text_chars,
        max_features=s.max_features,
    )
    out = await predict_examples(
        m, parsed.examples, len(raw), backend, cache, ctx.batcher, feedback
    )
    if parsed.single:
        return FastJSON(out[0])
    return FastJSON({"predictions": out})


@router.get("/{m}/predict", response_model=Prediction, responses=ERRORS, dependencies=[Predict])
async def get_predict(
    m: ModelName,
    state: StateDep,
    backend: BackendDep,
    cache: CacheDep,
    text: Annotated[str, Query(description="the text to score")],
    feedback: Annotated[
        bool, Query(description="keep the features for feedback (if the model keeps any)")
    ] = True,
) -> FastJSON:
    """Predict one text given in the query string (a quick look)."""
    if len(text) > state.settings.max_text_chars:
        raise PayloadTooLarge(
            f"text has {len(text)} characters, more than max_text_chars={state.settings.max_text_chars}",
            field="text",
        )
    assert state.batcher is not None
    out = await predict_examples(
        m, [{"text": text}], len(text), backend, cache, state.batcher, feedback
    )
    return FastJSON(out[0])
