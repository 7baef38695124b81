"""The averaged perceptron (Freund & Schapire 1999; Collins 2002), binary.

The learner runs the plain perceptron on ``w, b`` but *serves* the average of the weight
vectors after each example seen so far, ``(w_1 + … + w_T)/T``, bias included. Mistakes are
counted against that served average, like every learner's (docs/algorithms.md).

Lazy averaging (Daumé's trick) keeps an update O(non-zeros), never O(dim): beside ``w`` keep
``u = Σ c·y·x`` over the updates, where ``c`` is the number of examples seen *before* the
update; then the average after ``T`` examples is exactly ``w − u/T`` (and ``b − ub/T``), which
margins read in O(nnz) without forming it.

>>> from service.learning.batch import Batch
>>> m = AveragedPerceptron(dim=2)
>>> m.learn(Batch.from_rows([([0], [1.0]), ([1], [1.0])], [1, 0])).tolist()
[True, True]
>>> m.serving().W.tolist(), m.serving().b   # average of w_1 = (1, 0), w_2 = (1, -1)
([1.0, -0.5], 0.5)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from service.learning._kernels import (
    FASTMATH,
    csr_margins_scaled_diff,
    load_counters,
    record_served,
    row_dot_pair,
    sign,
    store_counters,
)
from service.learning.batch import Batch
from service.learning.linear import (
    Learner,
    _as_csr,
    _check_indices,
    float_slots,
)
from service.learning.registry import register

_FLOATS = ("b", "ub")
B, UB = float_slots(*_FLOATS)


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _learn_kernel(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    y: np.ndarray,
    wu: np.ndarray,
    c: np.ndarray,
    f: np.ndarray,
    thick: float,
    repeats: int,
    out: np.ndarray,
    margins: np.ndarray,
) -> None:
    """c = [seen, mistakes, updates]; f = [max_norm, b, ub]."""
    n = indptr.shape[0] - 1
    seen, mistakes, updates, r2 = load_counters(c, f)
    b = f[B]
    ub = f[UB]
    lift = 0.0 if thick == np.inf else thick  # the perceptron's rule: update on y·sw ≤ lift
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        sw, su, sq = row_dot_pair(indptr, indices, data, i, wu)
        sw += b
        su += ub
        # served: the average after `seen` examples (w itself, i.e. zero, before any)
        served = sw - su / seen if seen > 0 else sw
        yi = sign(y[i])
        r2 = max(r2, sq)
        mistakes += record_served(i, served, yi, out, margins)
        changed = False
        for rep in range(repeats):
            if rep > 0:  # what would be served once this row is counted
                sw, su, sq = row_dot_pair(indptr, indices, data, i, wu)
                sw += b
                served = sw - (su + ub) / (seen + 1)
            if yi * served > thick or yi * sw > lift:
                break
            cy = seen * yi
            for k in range(lo, hi):
                j = indices[k]
                wu[j, 0] += yi * data[k]
                wu[j, 1] += cy * data[k]
            b += yi
            ub += cy
            changed = True
        if changed:
            updates += 1
        seen += 1
    store_counters(c, f, seen, mistakes, updates, r2)
    f[B] = b
    f[UB] = ub


@register
class AveragedPerceptron(Learner):
    """The perceptron, serving the running average of its weights; no hyper-parameters."""

    name = "averaged_perceptron"
    _arrays = ("wu",)
    _float_slots = _FLOATS
    wu: np.ndarray

    def __init__(self, dim: int, n_classes: int = 2):
        super().__init__(dim, n_classes)

    def _init_arrays(self) -> dict[str, np.ndarray]:
        """``w`` and ``u`` interleaved, shape (dim, 2): both weights of a feature share a cache
        line, so a row costs one random memory access per feature, not two (~1.5× faster)."""
        return {"wu": np.zeros((self.dim, 2), dtype=np.float64)}

    @property
    def w(self) -> np.ndarray:
        """The perceptron's current weights (a view)."""
        return self.wu[:, 0]

    @property
    def u(self) -> np.ndarray:
        """The lazy sum ``Σ c·y·x`` (a view)."""
        return self.wu[:, 1]

    def _learn(self, batch: Batch, out: np.ndarray, margins: np.ndarray) -> None:
        thick, repeats = self._thick_args()
        _learn_kernel(
            batch.indptr, batch.indices, batch.data, batch.y,
            self.wu, self._c, self._f, thick, repeats, out, margins,
        )  # fmt: skip

    def _served(self) -> tuple[np.ndarray, float]:
        """The average ``w − u/T`` (O(dim): only for snapshots; margins avoid it)."""
        t = self.examples_seen
        if t == 0:
            return self.w, float(self._f[B])
        return self.w - self.u / t, float(self._f[B] - self._f[UB] / t)

    def decision(self, batch: Batch) -> np.ndarray:
        _check_indices(batch, self.dim)
        indptr, indices, data = _as_csr(batch)
        return csr_margins_scaled_diff(
            indptr, indices, data, self.wu, float(self._f[B]), float(self._f[UB]),
            float(self.examples_seen),
        )  # fmt: skip


__all__ = ["AveragedPerceptron"]
