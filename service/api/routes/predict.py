"""Predictions from the in-memory head version: no Redis read on this path.

The only Redis traffic is one pipelined write that keeps each prediction's features for
feedback (with the model's TTL).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Query, Request

from service.api.backend import Backend
from service.api.cache import ModelCache, Served
from service.api.compute import run_cpu
from service.api.deps import BackendDep, CacheDep, Predict, StateDep, app_state
from service.api.parsing import body_format, parse_examples
from service.api.responses import FastJSON
from service.api.routes.models import ERRORS, ModelName
from service.api.schemas import Prediction, Predictions
from service.errors import PayloadTooLarge
from service.learning.features import Batch

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


def score(served: Served, examples: list[Any]) -> tuple[Batch, list[dict[str, Any]]]:
    """Featurize and score a batch; one dict per example (without the prediction id)."""
    batch: Batch = served.featurizer.transform(examples, labels=False)
    model = served.model
    margins = np.asarray(model.margins(batch), dtype=np.float64)
    proba = np.asarray(model.proba(batch), dtype=np.float64)
    classes = np.asarray(model.predict(batch))
    name = served.featurizer.label_name
    out: list[dict[str, Any]] = []
    if margins.ndim == 1:
        for i in range(batch.n):
            out.append(
                {
                    "label": name(int(classes[i])),
                    "score": float(min(1.0, max(0.0, proba[i]))),
                    "margin": float(margins[i]),
                    "version": served.version,
                }
            )
    else:
        for i in range(batch.n):
            k = int(classes[i])
            out.append(
                {
                    "label": name(k),
                    "score": float(min(1.0, max(0.0, proba[i, k]))),
                    "margin": float(margins[i, k]),
                    "version": served.version,
                }
            )
    return batch, out


async def predict_examples(
    m: str, examples: list[Any], size: int, backend: Backend, cache: ModelCache
) -> list[dict[str, Any]]:
    served = await cache.get(m)
    batch, answers = await run_cpu(size, score, served, examples)
    pids = [uuid.uuid4().hex for _ in answers]
    for answer, pid in zip(answers, pids, strict=True):
        answer["prediction_id"] = pid
    await backend.keep(m, pids, batch, served.feedback_ttl)
    return answers


@router.post(
    "/{m}/predict",
    response_model=Prediction | Predictions,
    responses=ERRORS,
    openapi_extra=PREDICT_BODY,
    dependencies=[Predict],
)
async def post_predict(
    m: ModelName,
    request: Request,
    format: Annotated[str | None, Query(description="json | ndjson")] = None,
) -> FastJSON:
    """Predict one example (one answer) or a batch (``{"predictions": [...]}``)."""
    state = app_state(request)  # the hot path: no per-request dependency resolution
    backend, cache = state.backend, state.cache
    assert backend is not None and cache is not None
    kind = body_format(request.headers.get("content-type"), format)
    raw = await request.body()
    s = state.settings
    parsed = parse_examples(
        raw,
        kind,
        max_batch=s.max_batch,
        max_text_chars=s.max_text_chars,
        max_features=s.max_features,
    )
    answers = await predict_examples(m, parsed.examples, len(raw), backend, cache)
    if parsed.single:
        return FastJSON(answers[0])
    return FastJSON({"predictions": answers})


@router.get("/{m}/predict", response_model=Prediction, responses=ERRORS, dependencies=[Predict])
async def get_predict(
    m: ModelName,
    state: StateDep,
    backend: BackendDep,
    cache: CacheDep,
    text: Annotated[str, Query(description="the text to score")],
) -> FastJSON:
    """Predict one text given in the query string (a quick look)."""
    if len(text) > state.settings.max_text_chars:
        raise PayloadTooLarge(
            f"text has {len(text)} characters, more than max_text_chars={state.settings.max_text_chars}",
            field="text",
        )
    answers = await predict_examples(m, [{"text": text}], len(text), backend, cache)
    return FastJSON(answers[0])
