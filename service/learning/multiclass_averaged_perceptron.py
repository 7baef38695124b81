"""The multi-class averaged perceptron: the multi-class perceptron's updates, serving the
average of all weight matrices seen (Freund & Schapire 1999; Collins 2002).

Lazy averaging as in the binary form: beside ``W, b`` keep ``U = Σ c·Δ`` over the updates,
``c`` the number of examples seen before the update; after ``T`` examples the average is
exactly ``W − U/T`` (``b − ub/T``), so an update costs O(nnz), never O(K·dim). Mistakes are
counted against the served average (docs/algorithms.md).

>>> from service.learning.batch import Batch
>>> m = MulticlassAveragedPerceptron(dim=2, n_classes=3)
>>> m.learn(Batch.from_rows([([0], [1.0]), ([1], [1.0])], [2, 1])).tolist()
[True, True]
>>> m.serving().W.tolist()   # the average of W_1 and W_2
[[-1.0, 0.0], [0.0, 0.5], [1.0, -0.5]]
"""

from __future__ import annotations

import numpy as np
from numba import njit

from service.learning._kernels import load_counters, store_counters
from service.learning._multiclass import MulticlassLearner, margins_t, top_wrong
from service.learning.batch import Batch
from service.learning.linear import _as_csr, _check_indices
from service.learning.registry import register


@njit(cache=True, nogil=True)
def _learn_kernel(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    y: np.ndarray,
    W: np.ndarray,
    U: np.ndarray,
    b: np.ndarray,
    ub: np.ndarray,
    c: np.ndarray,
    f: np.ndarray,
    out: np.ndarray,
    margins: np.ndarray,
) -> None:
    """c = [seen, mistakes, updates]; f = [max_norm]; ``margins[i]``: the served scores."""
    n = indptr.shape[0] - 1
    K = W.shape[0]
    sw = np.empty(K, dtype=np.float64)
    su = np.empty(K, dtype=np.float64)
    seen, mistakes, updates, r2 = load_counters(c, f)
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        for r in range(K):
            sw[r] = 0.0
            su[r] = 0.0
        sq = 0.0
        for k in range(lo, hi):
            j = indices[k]
            v = data[k]
            sq += v * v
            for r in range(K):
                sw[r] += W[r, j] * v
                su[r] += U[r, j] * v
        r2 = max(r2, sq)
        # served: the average after `seen` examples (W itself, i.e. zero, before any)
        best = 0
        best_s = 0.0
        for r in range(K):
            sw[r] += b[r]
            served = sw[r] - (su[r] + ub[r]) / seen if seen > 0 else sw[r]
            margins[i, r] = served
            if r == 0 or served > best_s:
                best, best_s = r, served
        yi = y[i]
        if best != yi:
            out[i] = True
            mistakes += 1
        r = top_wrong(sw, yi)
        if sw[yi] <= sw[r]:
            cnt = float(seen)
            for k in range(lo, hi):
                j = indices[k]
                v = data[k]
                W[yi, j] += v
                W[r, j] -= v
                U[yi, j] += cnt * v
                U[r, j] -= cnt * v
            b[yi] += 1.0
            b[r] -= 1.0
            ub[yi] += cnt
            ub[r] -= cnt
            updates += 1
        seen += 1
    store_counters(c, f, seen, mistakes, updates, r2)


@register
class MulticlassAveragedPerceptron(MulticlassLearner):
    """The multi-class perceptron serving its running average; no hyper-parameters."""

    name = "averaged_perceptron"
    _arrays = ("W", "U", "b", "ub")
    U: np.ndarray
    ub: np.ndarray

    def __init__(self, dim: int, n_classes: int = 3):
        super().__init__(dim, n_classes)

    def _learn(self, batch: Batch, out: np.ndarray, margins: np.ndarray) -> None:
        _learn_kernel(
            batch.indptr, batch.indices, batch.data, batch.y,
            self.W, self.U, self.b, self.ub, self._c, self._f, out, margins,
        )  # fmt: skip

    def _served(self) -> tuple[np.ndarray, np.ndarray]:
        """The average ``W − U/T`` (O(K·dim): snapshots only; margins avoid it)."""
        t = self.examples_seen
        if t == 0:
            return self.W, self.b
        return self.W - self.U / t, self.b - self.ub / t

    def decision(self, batch: Batch) -> np.ndarray:
        _check_indices(batch, self.dim)
        indptr, indices, data = _as_csr(batch)
        S = margins_t(indptr, indices, data, self.W, self.b, 1.0)
        t = self.examples_seen
        if t == 0:
            return S
        out: np.ndarray = S - margins_t(indptr, indices, data, self.U, self.ub, 1.0) / t
        return out


__all__ = ["MulticlassAveragedPerceptron"]
