"""What every multi-class learner shares: the weight layout, the compiled score helpers, and
the served model.

Layout: ``W`` of shape (K, dim), one row per class, and ``b`` of shape (K,), as the served
:class:`~service.learning.served.LinearModel` holds them; learners that keep ``W = scale·V``
store ``V`` under the name ``W`` and report ``scale`` through :meth:`_served_t`, so
:meth:`MulticlassLearner.decision` reads the state without forming the served matrix.

Conventions, shared by every multi-class algorithm:

- the predicted class is the argmax of ``s = W·x + b`` (ties go to the lowest index, as
  ``numpy.argmax``); a *mistake* is a served prediction different from the label;
- the *offending* class ``r`` is the highest-scoring wrong class (ties: lowest index);
- updates move the true row up and the offending row down (Crammer & Singer 2003), the bias
  beside the weights, left out of ‖x‖² (as the binary perceptron and PA family do);
- every kernel writes the K served scores of row i to ``margins[i]`` in the pass that
  decides its mistake.

The multi-class perceptron and PA family differ only in the step τ, so they share one loop,
:func:`learn_multiclass_additive`, as the binary ones share ``_additive.learn_additive``:

============  ====================================  ===================================
rule          update when (r: top wrong class)      τ
============  ====================================  ===================================
PERCEPTRON    s_y ≤ s_r                             1
PA            ℓ = 1 − (s_y − s_r) > 0, ‖x‖ > 0      ℓ/(2‖x‖²)
PA1           ℓ > 0, ‖x‖ > 0                        min(C, ℓ/(2‖x‖²))
PA2           ℓ > 0                                 ℓ/(2‖x‖² + 1/(2C))
============  ====================================  ===================================

then ``W[y] += τ·x, b[y] += τ`` and ``W[r] −= τ·x, b[r] −= τ``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numba import njit

from service.learning._additive import PA, PA1, PA2, PERCEPTRON
from service.learning._kernels import load_counters, store_counters
from service.learning.batch import Batch
from service.learning.linear import (
    Learner,
    _as_csr,
    _check_indices,
)


@njit(cache=True, nogil=True, inline="always")
def row_scores(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    i: int,
    W: np.ndarray,
    b: np.ndarray,
    scale: float,
    s: np.ndarray,
) -> float:
    """Fill ``s`` with ``scale·(W @ x_i) + b`` and return ‖x_i‖²."""
    K = W.shape[0]
    for r in range(K):
        s[r] = 0.0
    sq = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        j = indices[k]
        v = data[k]
        sq += v * v
        for r in range(K):
            s[r] += W[r, j] * v
    for r in range(K):
        s[r] = s[r] * scale + b[r]
    return sq


@njit(cache=True, nogil=True, inline="always")
def argmax(s: np.ndarray) -> int:
    """Index of the largest score; ties go to the lowest index (as ``numpy.argmax``)."""
    best = 0
    for r in range(1, s.shape[0]):
        if s[r] > s[best]:
            best = r
    return best


@njit(cache=True, nogil=True, inline="always")
def record_class(i: int, s: np.ndarray, yi: int, out: np.ndarray) -> int:
    """Row ``i``'s mistake flag from its served scores ``s``: 1 (and ``out[i]`` set) when the
    top class is not ``yi``, else 0."""
    if argmax(s) != yi:
        out[i] = True
        return 1
    return 0


@njit(cache=True, nogil=True, inline="always")
def top_wrong(s: np.ndarray, y: int) -> int:
    """The highest-scoring class other than ``y`` (ties: lowest index)."""
    best = -1
    for r in range(s.shape[0]):
        if r != y and (best < 0 or s[r] > s[best]):
            best = r
    return best


@njit(cache=True, nogil=True, inline="always")
def add_row(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    i: int,
    W: np.ndarray,
    r: int,
    step: float,
) -> None:
    """``W[r] += step·x_i``."""
    for k in range(indptr[i], indptr[i + 1]):
        W[r, indices[k]] += step * data[k]


@njit(cache=True, nogil=True)
def margins_t(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    W: np.ndarray,
    b: np.ndarray,
    scale: float,
) -> np.ndarray:
    """``S[i] = scale·(W @ x_i) + b`` for every row: shape (n, K)."""
    n = indptr.shape[0] - 1
    K = W.shape[0]
    out = np.empty((n, K), dtype=np.float64)
    for i in range(n):
        row_scores(indptr, indices, data, i, W, b, scale, out[i])
    return out


@njit(cache=True, nogil=True)
def learn_multiclass_additive(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    y: np.ndarray,
    W: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    f: np.ndarray,
    rule: int,
    C: float,
    out: np.ndarray,
    margins: np.ndarray,
) -> None:
    """c = [seen, mistakes, updates]; f = [max_norm]; ``margins[i]`` = the K served scores."""
    n = indptr.shape[0] - 1
    seen, mistakes, updates, r2 = load_counters(c, f)
    half_inv_c = 0.5 / C
    for i in range(n):
        s = margins[i]
        sq = row_scores(indptr, indices, data, i, W, b, 1.0, s)
        r2 = max(r2, sq)
        yi = y[i]
        mistakes += record_class(i, s, yi, out)
        r = top_wrong(s, yi)
        tau = 0.0
        if rule == PERCEPTRON:
            if s[yi] <= s[r]:
                tau = 1.0
        else:
            loss = 1.0 - (s[yi] - s[r])
            if loss > 0.0:
                if rule == PA2:
                    tau = loss / (2.0 * sq + half_inv_c)
                elif sq > 0.0:
                    tau = loss / (2.0 * sq)
                    if rule == PA1 and tau > C:
                        tau = C
        if tau > 0.0:
            add_row(indptr, indices, data, i, W, yi, tau)
            add_row(indptr, indices, data, i, W, r, -tau)
            b[yi] += tau
            b[r] -= tau
            updates += 1
        seen += 1
    store_counters(c, f, seen, mistakes, updates, r2)


class MulticlassLearner(Learner):
    """Base of the multi-class learners: ``W`` (K, dim) and ``b`` (K,)."""

    multiclass: ClassVar[bool] = True
    link: str = "softmax"
    _arrays: ClassVar[tuple[str, ...]] = ("W", "b")
    W: np.ndarray
    b: np.ndarray

    def _init_arrays(self) -> dict[str, np.ndarray]:
        K = self.n_classes
        return {
            key: np.zeros((K, self.dim) if key[0].isupper() else K, dtype=np.float64)
            for key in self._arrays
        }

    def _scale(self) -> float:
        """The factor the stored weights are multiplied by (1 unless a subclass scales)."""
        return 1.0

    def _served_t(self) -> tuple[np.ndarray, np.ndarray, float]:
        """Served ``(W, b, scale)``: the served margins are ``scale·(W @ x) + b``."""
        return self.W, self.b, self._scale()

    def _served(self) -> tuple[np.ndarray, np.ndarray]:
        W, b, scale = self._served_t()
        return W * scale, b

    def decision(self, batch: Batch) -> np.ndarray:
        """Served margins (n, K), read from the transposed weights without copying them."""
        _check_indices(batch, self.dim)
        indptr, indices, data = _as_csr(batch)
        W, b, scale = self._served_t()
        return margins_t(indptr, indices, data, W, np.ascontiguousarray(b), float(scale))


class MulticlassAdditiveLearner(MulticlassLearner):
    """Base of the learners that run :func:`learn_multiclass_additive`."""

    RULE = PERCEPTRON
    C: float = 1.0  # PA-I's cap, PA-II's slack weight; unused by the others

    def _learn(self, batch: Batch, out: np.ndarray, margins: np.ndarray) -> None:
        learn_multiclass_additive(
            batch.indptr, batch.indices, batch.data, batch.y, self.W, self.b, self._c,
            self._f, self.RULE, float(self.C), out, margins,
        )  # fmt: skip


__all__ = [
    "PA",
    "PA1",
    "PA2",
    "PERCEPTRON",
    "MulticlassAdditiveLearner",
    "MulticlassLearner",
    "add_row",
    "argmax",
    "learn_multiclass_additive",
    "margins_t",
    "row_scores",
    "top_wrong",
]
