"""Building a learner from a stored spec dict, and checking a batch before it is learned.

The spec dict is what ``ModelSpec.to_dict()`` wrote. When ``service.learning.spec`` is
available it builds the learner (presets and defaults applied); otherwise the registry is
called directly with the spec's algorithm, dim, class count and params.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from service.errors import InvalidSpec
from service.learning.features import Batch


def build_learner(spec: Mapping[str, Any]) -> Any:
    """A fresh learner for ``spec`` (raises :class:`InvalidSpec` for a spec it cannot build)."""
    try:
        from service.learning.spec import ModelSpec
    except ImportError:
        ModelSpec = None  # until spec.py exists
    if ModelSpec is not None:
        return ModelSpec.from_dict(dict(spec)).build_learner()
    from service.learning.registry import make_learner

    try:
        dim = int(spec["dim"]) if spec.get("dim") else 2 ** int(spec["bits"])
        n_classes = len(spec.get("classes") or (0, 1))
        return make_learner(str(spec["algorithm"]), dim, n_classes, dict(spec.get("params") or {}))
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidSpec(f"cannot build a learner from the stored spec: {e}", field="spec") from e


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
