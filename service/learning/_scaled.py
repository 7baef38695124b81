"""The base of the scale×vector learners (Pegasos, logistic regression), binary.

Both shrink every weight at every example (the L2 regulariser), which would cost O(dim); so
both keep ``w = scale·v`` and shrink ``scale`` alone, an O(1) step, and both renormalise
``v ← scale·v, scale ← 1`` (O(dim), rare) once ``scale`` falls below
:data:`RENORMALISE_BELOW`, before ``v`` could overflow. What they share is here: the
arrays and slots (``v``; ``b``, ``scale`` first among the float slots), the served weights,
the served margins read from ``v`` without forming ``w``, and the row read of the kernels.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numba import njit

from service.learning._kernels import FASTMATH, csr_margins
from service.learning.batch import Batch
from service.learning.linear import Learner, _as_csr, _check_indices, float_slots

RENORMALISE_BELOW = 1e-10

#: The float slots every scaled learner starts with; a subclass appends its own.
SCALED_FLOATS = ("b", "scale")
B, SCALE = float_slots(*SCALED_FLOATS)


@njit(cache=True, nogil=True, fastmath=FASTMATH, inline="always")
def read_row(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, i: int, v: np.ndarray
) -> tuple[float, float]:
    """``(v·x_i, ‖x_i‖²)`` in one pass."""
    dot = 0.0
    sq = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        x = data[k]
        dot += v[indices[k]] * x
        sq += x * x
    return dot, sq


class ScaledLearner(Learner):
    """``w = scale·v`` plus a bias ``b``; the served margin is ``scale·(v·x) + b``."""

    _arrays: ClassVar[tuple[str, ...]] = ("v",)
    _float_slots: ClassVar[tuple[str, ...]] = SCALED_FLOATS
    v: np.ndarray

    def __init__(self, dim: int, n_classes: int = 2):
        assert self._float_slots[:2] == SCALED_FLOATS, "b and scale come first"
        super().__init__(dim, n_classes)
        self._f[SCALE] = 1.0

    def _served(self) -> tuple[np.ndarray, float]:
        return self.v * self._f[SCALE], float(self._f[B])

    def decision(self, batch: Batch) -> np.ndarray:
        _check_indices(batch, self.dim)
        indptr, indices, data = _as_csr(batch)
        dots: np.ndarray = csr_margins(indptr, indices, data, self.v, 0.0)
        margins: np.ndarray = dots * self._f[SCALE] + self._f[B]
        return margins


__all__ = ["RENORMALISE_BELOW", "SCALE", "SCALED_FLOATS", "B", "ScaledLearner", "read_row"]
