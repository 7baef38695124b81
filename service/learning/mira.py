"""MIRA, binary (Crammer & Singer 2003): the smallest change that fixes a mistake, capped.

On a mistake (y·s ≤ 0) — or, in the aggressive form with ``margin`` > 0, whenever
y·s < ``margin`` — take ``τ = min(C, (1 − y·s)/‖x‖²)`` and ``w += τ·y·x``, ``b += τ·y``. As for
the PA family, the bias is learned apart and left out of ‖x‖²; an all-zero ``x`` gives τ = 0.
With ``margin`` = 1 this is PA-I; with ``margin`` = 0 it is conservative (mistake-driven).

>>> from service.learning.features import Batch
>>> m = MIRA(dim=2, C=10.0)
>>> m.learn(Batch.from_rows([([0], [2.0]), ([0], [2.0])], [1, 1])).tolist()
[True, False]
>>> m.w.tolist(), m.b, m.updates   # τ = 1/4; then y·s = 1.25 > 0: no update
([0.5, 0.0], 0.25, 1)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from service.learning._kernels import FASTMATH
from service.learning.features import Batch
from service.learning.linear import InvalidParameter, Learner, non_negative, positive
from service.learning.registry import register


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _learn_kernel(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    c: np.ndarray,
    f: np.ndarray,
    C: float,
    margin: float,
    out: np.ndarray,
) -> None:
    """c = [seen, mistakes, updates]; f = [max_norm, b]."""
    n = indptr.shape[0] - 1
    seen, mistakes, updates = c[0], c[1], c[2]
    r2 = f[0] * f[0]
    b = f[1]
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        s = 0.0
        sq = 0.0
        for k in range(lo, hi):
            v = data[k]
            s += w[indices[k]] * v
            sq += v * v
        s += b
        yi = 1.0 if y[i] == 1 else -1.0
        if sq > r2:
            r2 = sq
        if (s > 0.0) != (yi > 0.0):
            out[i] = True
            mistakes += 1
        ys = yi * s
        if (ys <= 0.0 or ys < margin) and sq > 0.0:
            tau = (1.0 - ys) / sq
            if tau > C:
                tau = C
            if tau > 0.0:
                step = tau * yi
                for k in range(lo, hi):
                    w[indices[k]] += step * data[k]
                b += step
                updates += 1
        seen += 1
    c[0], c[1], c[2] = seen, mistakes, updates
    f[0] = np.sqrt(r2)
    f[1] = b


@register
class MIRA(Learner):
    """MIRA with cap ``C`` (> 0) and ``margin`` in [0, 1] (> 0: the aggressive form)."""

    name = "mira"
    _float_slots = ("b",)
    w: np.ndarray

    def __init__(self, dim: int, n_classes: int = 2, C: float = 1.0, margin: float = 0.0):
        self.C = positive("C", C)
        self.margin = non_negative("margin", margin)
        if self.margin > 1.0:  # the step aims at y·s = 1: a larger margin would never move w
            raise InvalidParameter("margin", f"margin must be <= 1, got {margin!r}")
        super().__init__(dim, n_classes)

    @property
    def b(self) -> float:
        return float(self._f[1])

    def _learn(self, batch: Batch, out: np.ndarray) -> None:
        _learn_kernel(
            batch.indptr, batch.indices, batch.data, batch.y,
            self.w, self._c, self._f, self.C, self.margin, out,
        )  # fmt: skip

    def _served(self) -> tuple[np.ndarray, float]:
        return self.w, self.b
