"""Multi-class ``adagrad``: one-against-all over Vowpal Wabbit's adaptive, normalised,
importance-invariant update — what ``vw --oaa K`` runs with its defaults.

K binary learners share the features and nothing else: row ``r`` learns the example as
``y_r = +1`` if its label is ``r`` and ``−1`` otherwise, with exactly the binary update of
:mod:`service.learning.adagrad` (same ``loss``, ``lr``, ``invariant``, ``bias``). Each row keeps
its own per-feature statistics (``G``, the sum of squared gradients, and ``s``, the largest
``|x|`` seen) and its own global normaliser (``T`` rows learned, ``N`` the sum of their
normalised ``|x|²``), as VW does: VW gives each class its own weight offset and
``gd_per_model_state`` (``gd.cc``: ``gd_per_model_states[ec.ft_offset / stride]``), so
``vw --oaa K`` is K independent binary VW learners (``tests/learning/test_multiclass_adagrad.py``
checks it against ``vw --oaa`` itself when ``vowpalwabbit`` is installed, and always against
K runs of the plain binary transcription).

For each example, the K served scores ``s_r = w_r·x + b_r`` are read first; the prediction is
their arg-max (ties: the lowest index, as VW and ``numpy.argmax``) and a mistake is a
prediction other than the label. Then row ``r = 0 … K−1`` takes the binary step from its
served ``s_r``: ``d = ℓ'(s_r)`` for ``y_r``; nothing moves when ``d = 0`` (hinge or modified
Huber with ``y_r·s_r ≥ 1``: a row already right by a margin is not learned — with those
losses most rows of most examples cost nothing); else ``G``, ``s``, ``T``, ``N`` of row r move
and ``w_r``, ``b_r`` take the (invariant) step, as in the binary docstring. The served margins
are the K scores (the ``softmax`` link turns them into class probabilities).

Layout: ``wgs`` of shape (3K, dim) holds ``w`` (rows 0…K−1), ``G`` (rows K…2K−1) and ``s``
(rows 2K…3K−1), in Fortran order, so that the 3K numbers of one feature are adjacent in
memory: a feature costs one random memory access for all K rows, not 3K. Its feature axis is
axis 1, as for every multi-class state, so commits stay sparse (``workers/learners.py``).
Per class: ``b``, ``Gb`` (the bias's ``G``), ``N`` and ``T`` (shape (K,)).

>>> from service.learning.batch import Batch
>>> m = MulticlassAdaGrad(dim=3, n_classes=3)
>>> rows = [([0], [1.0]), ([1], [1.0]), ([2], [1.0])] * 10
>>> flags = m.learn(Batch.from_rows(rows, [0, 1, 2] * 10))
>>> int(flags[:3].sum()), int(flags[3:].sum())   # after one pass, no more mistakes
(2, 0)
>>> m.decision(Batch.from_rows([([1], [1.0])], [1])).argmax(axis=1).tolist()
[1]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from numba import njit

from service.learning._adagrad import LOSSES, dloss, flow
from service.learning._multiclass import MulticlassLearner, argmax
from service.learning.batch import Batch
from service.learning.linear import (
    MAX_NORM,
    MISTAKES,
    SEEN,
    UPDATES,
    _as_csr,
    _check_indices,
    boolean,
    one_of,
    positive,
)
from service.learning.registry import register


@njit(cache=True, nogil=True, inline="always")
def oaa_scores(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    i: int,
    wgs: np.ndarray,
    b: np.ndarray,
    s: np.ndarray,
) -> float:
    """Fill ``s`` with the K served scores ``w_r·x_i + b_r`` (``w`` = rows 0…K−1 of ``wgs``)
    and return ‖x_i‖²; the kernel and :meth:`MulticlassAdaGrad.decision` both read them here."""
    K = b.shape[0]
    for r in range(K):
        s[r] = 0.0
    sq = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        j = indices[k]
        v = data[k]
        sq += v * v
        for r in range(K):
            s[r] += wgs[r, j] * v
    for r in range(K):
        s[r] += b[r]
    return sq


@njit(cache=True, nogil=True)
def _margins(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, wgs: np.ndarray, b: np.ndarray
) -> np.ndarray:
    n = indptr.shape[0] - 1
    out = np.empty((n, b.shape[0]), dtype=np.float64)
    for i in range(n):
        oaa_scores(indptr, indices, data, i, wgs, b, out[i])
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def _learn_kernel(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    y: np.ndarray,
    wgs: np.ndarray,
    b: np.ndarray,
    gb: np.ndarray,
    big_n: np.ndarray,
    big_t: np.ndarray,
    c: np.ndarray,
    f: np.ndarray,
    loss: int,
    lr: float,
    bias: bool,
    invariant: bool,
    out: np.ndarray,
    margins: np.ndarray,
) -> None:
    """c = [seen, mistakes, updates]; f = [max_norm]; per class: b, gb, big_n, big_t (K,);
    wgs rows: w (0…K−1), G (K…2K−1), s (2K…3K−1); ``margins[i]``: the K served scores."""
    n = indptr.shape[0] - 1
    K = b.shape[0]
    seen, mistakes, updates = c[SEEN], c[MISTAKES], c[UPDATES]
    r2 = f[MAX_NORM] * f[MAX_NORM]
    longest = 0
    for i in range(n):
        longest = max(longest, indptr[i + 1] - indptr[i])
    rates = np.empty(longest, dtype=np.float64)
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        s = margins[i]
        sq = oaa_scores(indptr, indices, data, i, wgs, b, s)
        if sq > r2:
            r2 = sq
        yi = y[i]
        if argmax(s) != yi:
            out[i] = True
            mistakes += 1
        seen += 1
        changed = False
        for r in range(K):
            yr = 1.0 if r == yi else -1.0
            p = s[r]
            d = dloss(loss, yr, p)
            if d == 0.0:
                continue
            d2 = d * d
            g_row = K + r
            s_row = 2 * K + r
            norm_x = 0.0
            q = 0.0
            for k in range(lo, hi):
                j = indices[k]
                x = data[k]
                if x == 0.0:
                    rates[k - lo] = 0.0
                    continue
                ax = abs(x)
                x2 = x * x
                wgs[g_row, j] += d2 * x2
                s_j = wgs[s_row, j]
                if ax > s_j:
                    if s_j > 0.0:
                        wgs[r, j] *= s_j / ax
                    wgs[s_row, j] = ax
                    s_j = ax
                den = s_j * math.sqrt(wgs[g_row, j])  # 0 only on underflow: no step then
                rate = 1.0 / den if den > 0.0 else 0.0
                rates[k - lo] = rate
                nx = x / s_j
                norm_x += nx * nx
                q += x2 * rate
            rate_b = 0.0
            if bias:
                gb[r] += d2
                rate_b = 1.0 / math.sqrt(gb[r]) if gb[r] > 0.0 else 0.0
                norm_x += 1.0
                q += rate_b
            if not (q > 0.0 and big_n[r] + norm_x > 0.0):
                continue  # nothing can move (an empty row without bias, or underflow)
            big_t[r] += 1.0
            big_n[r] += norm_x
            mult = math.sqrt(big_t[r] / big_n[r])
            q *= mult
            u = (flow(loss, yr, p, lr * q) - p) / q if invariant else -lr * d
            u *= mult
            for k in range(lo, hi):
                w_step = u * data[k] * rates[k - lo]
                if w_step != 0.0:
                    wgs[r, indices[k]] += w_step
                    changed = True
            if bias and u != 0.0:
                b[r] += u * rate_b
                changed = True
        if changed:
            updates += 1
    c[SEEN], c[MISTAKES], c[UPDATES] = seen, mistakes, updates
    f[MAX_NORM] = np.sqrt(r2)


@register
class MulticlassAdaGrad(MulticlassLearner):
    """One-against-all ``adagrad`` (``vw --oaa K``): step ``lr`` (> 0), a ``loss`` among
    logistic/hinge/squared/modified_huber, ``invariant`` updates and ``bias``, as the binary
    form."""

    name = "adagrad"
    _arrays: ClassVar[tuple[str, ...]] = ("wgs", "b", "Gb", "N", "T")
    wgs: np.ndarray
    Gb: np.ndarray
    N: np.ndarray
    T: np.ndarray

    def __init__(
        self,
        dim: int,
        n_classes: int = 3,
        lr: float = 0.5,
        loss: str = "logistic",
        invariant: bool = True,
        bias: bool = True,
    ):
        self.lr = positive("lr", lr)
        self.loss = one_of("loss", loss, LOSSES)
        self.invariant = boolean("invariant", invariant)
        self.bias = boolean("bias", bias)
        super().__init__(dim, n_classes)

    def _init_arrays(self) -> dict[str, np.ndarray]:
        K = self.n_classes
        out = {key: np.zeros(K, dtype=np.float64) for key in ("b", "Gb", "N", "T")}
        out["wgs"] = np.zeros((3 * K, self.dim), dtype=np.float64, order="F")
        return out

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Load a state (see :meth:`Learner.set_state`), keeping ``wgs`` in Fortran order
        (a state decoded from a commit comes in C order)."""
        super().set_state(state)
        if not self.wgs.flags.f_contiguous:
            self.wgs = np.asfortranarray(self.wgs)

    def _learn(self, batch: Batch, out: np.ndarray, margins: np.ndarray) -> None:
        _learn_kernel(
            batch.indptr, batch.indices, batch.data, batch.y, self.wgs, self.b, self.Gb,
            self.N, self.T, self._c, self._f, LOSSES.index(self.loss), self.lr, self.bias,
            self.invariant, out, margins,
        )  # fmt: skip

    def _served_t(self) -> tuple[np.ndarray, np.ndarray, float]:
        return self.wgs[: self.n_classes], self.b, 1.0

    def _served(self) -> tuple[np.ndarray, np.ndarray]:
        return self.wgs[: self.n_classes], self.b

    def decision(self, batch: Batch) -> np.ndarray:
        """The K served scores of each row, read from ``wgs`` directly (no copy of W)."""
        _check_indices(batch, self.dim)
        indptr, indices, data = _as_csr(batch)
        return _margins(indptr, indices, data, self.wgs, self.b)


__all__ = ["MulticlassAdaGrad", "oaa_scores"]
