"""The multi-class perceptron (Crammer & Singer 2003, "uniform" update to the top wrong row).

Update when ``s_y ≤ s_r`` (r the highest-scoring wrong class): ``W[y] += x, b[y] += 1`` and
``W[r] −= x, b[r] −= 1``. The ``≤`` mirrors the binary rule ``y·s ≤ 0``: with two classes the
difference ``W[1] − W[0]`` moves exactly like twice the binary perceptron's ``w``, so both
make the same mistakes, example for example (tested).

>>> from service.learning.features import Batch
>>> m = MulticlassPerceptron(dim=2, n_classes=3)
>>> x = Batch.from_rows([([0], [1.0]), ([1], [1.0]), ([0], [1.0]), ([0], [1.0])], [2, 1, 2, 2])
>>> m.learn(x).tolist()
[True, True, True, False]
>>> m.serving().W.tolist(), m.serving().b.tolist(), m.updates
([[-1.0, 0.0], [-1.0, 1.0], [2.0, -1.0]], [-1.0, 0.0, 1.0], 3)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from service.learning._multiclass import MulticlassLearner, add_row, argmax, row_scores, top_wrong
from service.learning.features import Batch
from service.learning.registry import register


@njit(cache=True, nogil=True)
def _learn_kernel(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    y: np.ndarray,
    W: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    f: np.ndarray,
    out: np.ndarray,
) -> None:
    """c = [seen, mistakes, updates]; f = [max_norm]."""
    n = indptr.shape[0] - 1
    s = np.empty(W.shape[0], dtype=np.float64)
    seen, mistakes, updates = c[0], c[1], c[2]
    r2 = f[0] * f[0]
    for i in range(n):
        sq = row_scores(indptr, indices, data, i, W, b, 1.0, s)
        if sq > r2:
            r2 = sq
        yi = y[i]
        if argmax(s) != yi:
            out[i] = True
            mistakes += 1
        r = top_wrong(s, yi)
        if s[yi] <= s[r]:
            add_row(indptr, indices, data, i, W, yi, 1.0)
            add_row(indptr, indices, data, i, W, r, -1.0)
            b[yi] += 1.0
            b[r] -= 1.0
            updates += 1
        seen += 1
    c[0], c[1], c[2] = seen, mistakes, updates
    f[0] = np.sqrt(r2)


@register
class MulticlassPerceptron(MulticlassLearner):
    """One perceptron row per class; no hyper-parameters."""

    name = "perceptron"

    def __init__(self, dim: int, n_classes: int = 3):
        super().__init__(dim, n_classes)

    def _learn(self, batch: Batch, out: np.ndarray) -> None:
        _learn_kernel(
            batch.indptr, batch.indices, batch.data, batch.y,
            self.W, self.b, self._c, self._f, out,
        )  # fmt: skip


__all__ = ["MulticlassPerceptron"]
