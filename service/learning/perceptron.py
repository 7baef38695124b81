"""Rosenblatt's perceptron, binary.

Update when y·s ≤ 0: ``w += y·x``, ``b += y`` (η = 1, the bias learned apart with step 1).
This is River's ``linear_model.Perceptron()`` exactly: hinge loss with threshold 0 and a
``<=`` test, SGD with learning rate 1 for weights and intercept; a tie (s = 0) predicts the
negative class. The test suite checks the two agree example for example.

>>> from service.learning.features import Batch
>>> p = Perceptron(dim=3)
>>> p.learn(Batch.from_rows([([0], [1.0]), ([1], [1.0]), ([0], [1.0])], [1, 0, 1])).tolist()
[True, True, False]
>>> p.w.tolist(), p.b, p.mistakes, p.updates
([1.0, -1.0, 0.0], 0.0, 2, 2)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from service.learning._kernels import FASTMATH
from service.learning.features import Batch
from service.learning.linear import Learner
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
        if yi * s <= 0.0:
            for k in range(lo, hi):
                w[indices[k]] += yi * data[k]
            b += yi
            updates += 1
        seen += 1
    c[0], c[1], c[2] = seen, mistakes, updates
    f[0] = np.sqrt(r2)
    f[1] = b


@register
class Perceptron(Learner):
    """The classic perceptron (Rosenblatt 1958); no hyper-parameters."""

    name = "perceptron"
    _float_slots = ("b",)
    w: np.ndarray

    def __init__(self, dim: int, n_classes: int = 2):
        super().__init__(dim, n_classes)

    @property
    def b(self) -> float:
        return float(self._f[1])

    def _learn(self, batch: Batch, out: np.ndarray) -> None:
        _learn_kernel(
            batch.indptr, batch.indices, batch.data, batch.y, self.w, self._c, self._f, out
        )

    def _served(self) -> tuple[np.ndarray, float]:
        return self.w, self.b
