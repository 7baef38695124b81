"""Multi-class Pegasos: stochastic sub-gradient descent on the multi-class hinge loss of
Crammer & Singer (2001), as in the Pegasos paper's multi-class extension (Shalev-Shwartz et
al. 2011, §6.2).

For every example t (counting from 1), with η = 1/(λt) and ``r`` the highest-scoring wrong
class: ``W ← (1 − 1/t)·W``; if ``s_y − s_r < 1`` also ``W[y] += η·x`` and ``W[r] −= η·x``;
with ``projection``, then ``W ← min(1, (1/√λ)/‖W‖_F)·W``. ``bias=True`` learns an
unregularised bias ``b[y] += η, b[r] −= η`` on violations (the paper has none).

O(K·nnz) per example: ``W = scale·V``, so the shrink and the projection only change
``scale``; ``‖V‖²`` is kept incrementally and ``V`` renormalised when ``scale < 1e-10``,
exactly as in the binary :mod:`service.learning.pegasos`.

>>> import math
>>> from service.learning.batch import Batch
>>> m = MulticlassPegasos(dim=3, n_classes=3, lam=0.5, projection=True)
>>> rows = [([0], [3.0]), ([1], [-2.0]), ([2], [1.0])] * 5
>>> _ = m.learn(Batch.from_rows(rows, [0, 1, 2] * 5))
>>> float(np.linalg.norm(m.serving().W)) <= 1 / math.sqrt(0.5) + 1e-12
True
"""

from __future__ import annotations

import numpy as np
from numba import njit

from service.learning._kernels import load_counters, store_counters
from service.learning._multiclass import (
    MulticlassLearner,
    record_class,
    row_scores,
    top_wrong,
)
from service.learning._scaled import RENORMALISE_BELOW
from service.learning.batch import Batch
from service.learning.linear import (
    boolean,
    float_slots,
    positive,
)
from service.learning.registry import register

_FLOATS = ("scale", "vsq")
SCALE, VSQ = float_slots(*_FLOATS)


@njit(cache=True, nogil=True)
def _learn_kernel(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    y: np.ndarray,
    V: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    f: np.ndarray,
    lam: float,
    projection: bool,
    bias: bool,
    out: np.ndarray,
    margins: np.ndarray,
) -> None:
    """c = [seen, mistakes, updates]; f = [max_norm, scale, vsq]; ``margins[i]``: the served
    scores."""
    n = indptr.shape[0] - 1
    K = V.shape[0]
    dots = np.empty(K, dtype=np.float64)
    zero = np.zeros(K, dtype=np.float64)
    seen, mistakes, updates, r2 = load_counters(c, f)
    scale, vsq = f[SCALE], f[VSQ]
    radius2 = 1.0 / lam
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        sq = row_scores(indptr, indices, data, i, V, zero, 1.0, dots)
        s = margins[i]
        for r in range(K):
            s[r] = scale * dots[r] + b[r]
        r2 = max(r2, sq)
        yi = y[i]
        mistakes += record_class(i, s, yi, out)
        r = top_wrong(s, yi)
        t = seen + 1
        eta = 1.0 / (lam * t)
        changed = False
        if t == 1:
            if vsq != 0.0:  # only reachable from a hand-made state: W ← 0·W
                V[:, :] = 0.0
                vsq = 0.0
                for q in range(K):
                    dots[q] = 0.0
                changed = True
            scale = 1.0
        elif vsq > 0.0:
            scale *= 1.0 - 1.0 / t
            changed = True
        if s[yi] - s[r] < 1.0:
            a = eta / scale
            for k in range(lo, hi):
                j = indices[k]
                x = data[k]
                V[yi, j] += a * x
                V[r, j] -= a * x
            # ‖V‖² after adding a·x to row y and −a·x to row r
            vsq += 2.0 * a * dots[yi] - 2.0 * a * dots[r] + 2.0 * a * a * sq
            if vsq < 0.0:
                vsq = 0.0
            if bias:
                b[yi] += eta
                b[r] -= eta
            changed = changed or sq > 0.0 or bias
        if projection:
            norm2 = scale * scale * vsq
            if norm2 > radius2:
                scale *= np.sqrt(radius2 / norm2)
        if scale < RENORMALISE_BELOW:
            acc = 0.0
            for q in range(K):
                for j in range(V.shape[1]):
                    V[q, j] *= scale
                    acc += V[q, j] * V[q, j]
            vsq = acc
            scale = 1.0
        if changed:
            updates += 1
        seen += 1
    store_counters(c, f, seen, mistakes, updates, r2)
    f[SCALE], f[VSQ] = scale, vsq


@register
class MulticlassPegasos(MulticlassLearner):
    """Multi-class Pegasos with ``lam`` (> 0), optional ``projection`` and ``bias``."""

    name = "pegasos"
    _float_slots = _FLOATS

    def __init__(
        self,
        dim: int,
        n_classes: int = 3,
        lam: float = 1e-4,
        projection: bool = False,
        bias: bool = False,
    ):
        self.lam = positive("lam", lam)
        self.projection = boolean("projection", projection)
        self.bias = boolean("bias", bias)
        super().__init__(dim, n_classes)
        self._f[SCALE] = 1.0

    def _scale(self) -> float:
        return float(self._f[SCALE])

    def _learn(self, batch: Batch, out: np.ndarray, margins: np.ndarray) -> None:
        _learn_kernel(
            batch.indptr, batch.indices, batch.data, batch.y, self.W, self.b, self._c,
            self._f, self.lam, self.projection, self.bias, out, margins,
        )  # fmt: skip


__all__ = ["MulticlassPegasos"]
