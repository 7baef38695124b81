"""Logistic regression by SGD on the log loss, with L2 and L1, binary.

Per example t (from 1), with ``p = σ(s)``, ``g = p − [y = +1]`` (the derivative of the log
loss in s) and the step ``η_t``: ``w ← (1 − η_t·l2)·w − η_t·g·x`` and ``b ← b − η_t·g`` (the
bias is not regularised). Step schedule: ``"constant"`` (η_t = lr) or ``"invscaling"``
(η_t = lr / t^power_t, as scikit-learn's ``SGDClassifier``).

L1 by the cumulative penalty of Tsuruoka, Tsujii & Ananiadou (2009): the total L1 penalty
``u = Σ η_t·l1`` every weight could have received is kept, and each weight touched by an
example is pulled towards zero by what it has not yet received (``u − q_j``), clipped at
zero — so weights of useless features become *exactly* 0, and the cost stays O(nnz).

L2 costs O(1): ``w = scale·v`` and the shrink only changes ``scale``. The L1 penalty is kept
in ``v`` units (``u += η_t·l1/scale``), which is exact: a penalty paid at step t and shrunk
afterwards is what the lazy sum gives. When ``scale`` falls below 1e-10, ``v``, ``q`` and
``u`` are renormalised (O(dim), rare).

Thick threshold (``params.thick``): a row with y·s above the margin is not learned; a
repeat re-applies the gradient step alone (same η_t, s read again); the L2 shrink and the
L1 penalty apply once per learned row.

The model's probability is ``σ(s)`` itself (``link = "calibrated-sigmoid"``).

>>> from service.learning.batch import Batch
>>> m = Logistic(dim=3, lr=0.5, l1=0.05)
>>> b = Batch.from_rows([([0, 2], [1.0, 1.0]), ([1, 2], [1.0, 1.0])] * 50, [1, 0] * 50)
>>> _ = m.learn(b)
>>> w = m.serving().W
>>> bool(w[0] > 0 > w[1]), float(w[2])   # feature 2 is in every row: useless, exactly 0
(True, 0.0)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from service.learning._kernels import (
    FASTMATH,
    load_counters,
    record_served,
    row_dot,
    sign,
    store_counters,
)
from service.learning._scaled import (
    RENORMALISE_BELOW,
    SCALE,
    SCALED_FLOATS,
    B,
    ScaledLearner,
    read_row,
)
from service.learning.batch import Batch
from service.learning.linear import (
    InvalidParameter,
    float_slots,
    non_negative,
    one_of,
    positive,
)
from service.learning.registry import register

_FLOATS = (*SCALED_FLOATS, "u")
_, _, U = float_slots(*_FLOATS)


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _sigmoid(s: float) -> float:
    if s >= 0.0:
        return 1.0 / (1.0 + float(np.exp(-s)))
    e = float(np.exp(s))
    return e / (1.0 + e)


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _learn_kernel(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    y: np.ndarray,
    v: np.ndarray,
    q: np.ndarray,
    c: np.ndarray,
    f: np.ndarray,
    lr: float,
    invscaling: bool,
    power_t: float,
    l2: float,
    l1: float,
    thick: float,
    repeats: int,
    out: np.ndarray,
    margins: np.ndarray,
) -> None:
    """c = [seen, mistakes, updates]; f = [max_norm, b, scale, u]."""
    n = indptr.shape[0] - 1
    seen, mistakes, updates, r2 = load_counters(c, f)
    b, scale, u = f[B], f[SCALE], f[U]
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        dot, sq = read_row(indptr, indices, data, i, v)
        s = scale * dot + b
        yi = sign(y[i])
        positive_label = yi > 0.0
        ys = yi * s
        r2 = max(r2, sq)
        mistakes += record_served(i, s, yi, out, margins)
        if ys <= thick:  # learned (always, without a thick threshold)
            t = seen + 1
            eta = lr / t**power_t if invscaling else lr
            if l2 > 0.0:
                scale *= 1.0 - eta * l2
            changed = l2 > 0.0
            for rep in range(repeats):  # the gradient step; a repeat re-reads the margin
                if rep > 0:
                    s = scale * row_dot(indptr, indices, data, i, v) + b
                    if (s if positive_label else -s) > thick:
                        break
                g = _sigmoid(s) - (1.0 if positive_label else 0.0)
                a = eta * g / scale
                if a == 0.0:
                    break
                for k in range(lo, hi):
                    v[indices[k]] -= a * data[k]
                b -= eta * g
                changed = True
            if l1 > 0.0:
                u += eta * l1 / scale
                for k in range(lo, hi):
                    j = indices[k]
                    z = v[j]
                    if z > 0.0:
                        v[j] = max(0.0, z - (u + q[j]))
                    elif z < 0.0:
                        v[j] = min(0.0, z + (u - q[j]))
                    q[j] += v[j] - z
            if scale < RENORMALISE_BELOW:
                for j in range(v.shape[0]):
                    v[j] *= scale
                    q[j] *= scale
                u *= scale
                scale = 1.0
            if changed:
                updates += 1
        seen += 1
    store_counters(c, f, seen, mistakes, updates, r2)
    f[B], f[SCALE], f[U] = b, scale, u


@register
class Logistic(ScaledLearner):
    """Logistic regression: step ``lr`` (> 0) on a ``schedule``, ``l2`` and ``l1`` (≥ 0)."""

    name = "logistic"
    link = "calibrated-sigmoid"
    _arrays = ("v", "q")
    _float_slots = _FLOATS
    q: np.ndarray

    def __init__(
        self,
        dim: int,
        n_classes: int = 2,
        lr: float = 0.1,
        schedule: str = "constant",
        power_t: float = 0.5,
        l2: float = 0.0,
        l1: float = 0.0,
    ):
        self.lr = positive("lr", lr)
        self.schedule = one_of("schedule", schedule, ("constant", "invscaling"))
        self.power_t = positive("power_t", power_t)
        self.l2 = non_negative("l2", l2)
        self.l1 = non_negative("l1", l1)
        if self.lr * self.l2 >= 1.0:  # the shrink factor 1 − η·l2 must stay positive
            raise InvalidParameter("l2", f"l2 must be < 1/lr = {1.0 / self.lr!r}, got {l2!r}")
        super().__init__(dim, n_classes)

    def _learn(self, batch: Batch, out: np.ndarray, margins: np.ndarray) -> None:
        thick, repeats = self._thick_args()
        _learn_kernel(
            batch.indptr, batch.indices, batch.data, batch.y, self.v, self.q, self._c, self._f,
            self.lr, self.schedule == "invscaling", self.power_t, self.l2, self.l1,
            thick, repeats, out, margins,
        )  # fmt: skip
