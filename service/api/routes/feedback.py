"""Feedback: the true label of an earlier prediction, learned from the features kept with it."""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi import APIRouter

from service.api.deps import BackendDep, CacheDep, Learn
from service.api.responses import FastJSON
from service.api.routes.models import ERRORS, ModelName
from service.api.schemas import Feedback, FeedbackAccepted
from service.errors import InvalidExample, StreamlearnError
from service.learning.batch import Batch

router = APIRouter(prefix="/models", tags=["feedback"])


def label_index(featurizer: Any, label: Any) -> int:
    try:
        return int(featurizer.label_index(label))
    except StreamlearnError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidExample(
            f"label {label!r} is not one of the model's classes", field="label"
        ) from exc


@router.post(
    "/{m}/feedback",
    status_code=202,
    response_model=FeedbackAccepted,
    responses=ERRORS,
    dependencies=[Learn],
)
async def post_feedback(
    m: ModelName, body: Feedback, backend: BackendDep, cache: CacheDep
) -> FastJSON:
    """Learn the true label of a prediction (202); unknown or expired prediction ids → 404.

    The append carries the id ``fb-<prediction_id>``, so a retried feedback is learned once.
    """
    served = await cache.get(m)
    y = label_index(served.featurizer, body.label)
    kept = await backend.take(m, body.prediction_id)
    batch = Batch(kept.indptr, kept.indices, kept.data, np.array([y], dtype=np.int32))
    await backend.append(m, batch, [f"fb-{body.prediction_id}"])
    return FastJSON({"accepted": 1, "prediction_id": body.prediction_id}, status_code=202)
