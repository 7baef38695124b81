"""Building a learner from a stored spec dict, and checking a batch before it is learned.

The spec dict is what ``ModelSpec.to_dict()`` wrote; ``ModelSpec.from_dict`` re-validates it
and builds the learner, so the worker and the API agree on every default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from service.learning.batch import Batch
from service.learning.linear import Learner
from service.learning.spec import ModelSpec


def build_learner(spec: Mapping[str, Any]) -> Learner:
    """A fresh learner for a stored spec dict (:class:`InvalidSpec` if it cannot be built)."""
    return ModelSpec.from_dict(dict(spec)).build_learner()


def check_batch(batch: Batch, dim: int, n_classes: int) -> None:
    """Raise ``ValueError`` if ``batch`` cannot be learned by a (dim, n_classes) learner.

    Vectorised; runs before ``learn`` so that a bad entry is dead-lettered whole and never
    half-learned (and never reaches a compiled loop with an index out of bounds).
    """
    if batch.y.shape[0] != batch.n:
        raise ValueError(f"{batch.y.shape[0]} labels for {batch.n} rows")
    if batch.nnz:
        lo, hi = int(batch.indices.min()), int(batch.indices.max())
        if lo < 0 or hi >= dim:
            raise ValueError(f"feature index {hi if hi >= dim else lo} outside [0, {dim})")
        if not np.isfinite(batch.data).all():
            raise ValueError("a feature value is NaN or infinite")
    if batch.n:
        ylo, yhi = int(batch.y.min()), int(batch.y.max())
        if ylo < 0 or yhi >= n_classes:
            raise ValueError(f"label {yhi if yhi >= n_classes else ylo} outside [0, {n_classes})")
