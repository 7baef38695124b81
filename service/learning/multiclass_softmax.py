"""Softmax (multinomial logistic) regression by SGD on the cross-entropy, multi-class.

Per example, with logits ``z = (W·x + b)/T`` (``temperature`` T) and probabilities
``p = softmax(z)`` computed with the maximum subtracted first (so no logit, however large,
can overflow ``exp``), the target ``q = (1 − ε)·onehot(y) + ε/K`` (``label_smoothing`` ε) and
the gradient ``g = (p − q)/T``: ``W ← (1 − lr·l2)·W``, then ``W[k] −= lr·g_k·x`` and
``b[k] −= lr·g_k`` for every class k (the bias is not regularised).

The served model is ``W/T, b/T`` with the ``softmax`` link, so the served probabilities are
the model's own, temperature included, and sum to 1. ``W = scale·V`` makes the L2 shrink O(1).
Every example with a non-zero gradient is an update (in practice all of them).

>>> from service.learning.batch import Batch
>>> m = MulticlassSoftmax(dim=2, n_classes=3, lr=0.5)
>>> _ = m.learn(Batch.from_rows([([0], [1.0]), ([1], [1.0])] * 20, [2, 0] * 20))
>>> p = m.serving().proba(Batch.from_rows([([0], [1.0])], [-1]))[0]
>>> int(p.argmax()), round(float(p.sum()), 12)
(2, 1.0)
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from service.learning._kernels import load_counters, store_counters
from service.learning._multiclass import MulticlassLearner, argmax, record_class, row_scores
from service.learning._scaled import RENORMALISE_BELOW
from service.learning.batch import Batch
from service.learning.linear import (
    InvalidParameter,
    float_slots,
    non_negative,
    positive,
)
from service.learning.registry import register

_FLOATS = ("scale",)
(SCALE,) = float_slots(*_FLOATS)


@njit(cache=True, nogil=True)
def softmax_into(z: np.ndarray, p: np.ndarray) -> None:
    """``p = softmax(z)`` with the max subtracted; a non-finite max gives a one-hot argmax."""
    K = z.shape[0]
    best = argmax(z)
    m = z[best]
    if not np.isfinite(m):
        for r in range(K):
            p[r] = 0.0
        p[best] = 1.0
        return
    total = 0.0
    for r in range(K):
        e = np.exp(z[r] - m)
        p[r] = e
        total += e
    for r in range(K):
        p[r] /= total


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
    lr: float,
    l2: float,
    temperature: float,
    smoothing: float,
    out: np.ndarray,
    margins: np.ndarray,
) -> None:
    """c = [seen, mistakes, updates]; f = [max_norm, scale]; ``margins[i]``: the served
    logits ``(scale/T)·(V·x) + b/T``."""
    n = indptr.shape[0] - 1
    K = V.shape[0]
    dots = np.empty(K, dtype=np.float64)
    p = np.empty(K, dtype=np.float64)
    g = np.empty(K, dtype=np.float64)
    zero = np.zeros(K, dtype=np.float64)
    seen, mistakes, updates, r2 = load_counters(c, f)
    scale = f[SCALE]
    shrink = 1.0 - lr * l2
    off = smoothing / K
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        sq = row_scores(indptr, indices, data, i, V, zero, 1.0, dots)
        z = margins[i]
        served_scale = scale / temperature  # the served model: (W/T, b/T), as _served_t
        for r in range(K):
            z[r] = dots[r] * served_scale + b[r] / temperature
        r2 = max(r2, sq)
        yi = y[i]
        mistakes += record_class(i, z, yi, out)
        softmax_into(z, p)
        nonzero = False
        for r in range(K):
            q = off + (1.0 - smoothing if r == yi else 0.0)
            g[r] = (p[r] - q) / temperature
            if g[r] != 0.0:
                nonzero = True
        if l2 > 0.0:
            scale *= shrink
        if nonzero:
            inv = lr / scale
            for k in range(lo, hi):
                j = indices[k]
                x = data[k] * inv
                for r in range(K):
                    V[r, j] -= g[r] * x
            for r in range(K):
                b[r] -= lr * g[r]
            updates += 1
        if scale < RENORMALISE_BELOW:
            V *= scale
            scale = 1.0
        seen += 1
    store_counters(c, f, seen, mistakes, updates, r2)
    f[SCALE] = scale


@register
class MulticlassSoftmax(MulticlassLearner):
    """Softmax regression: step ``lr`` (> 0), ``l2`` (≥ 0, lr·l2 < 1), ``temperature`` (> 0),
    ``label_smoothing`` (0 ≤ ε < 1)."""

    name = "softmax"
    link: str = "softmax"
    _float_slots = _FLOATS

    def __init__(
        self,
        dim: int,
        n_classes: int = 3,
        lr: float = 0.1,
        l2: float = 0.0,
        temperature: float = 1.0,
        label_smoothing: float = 0.0,
    ):
        self.lr = positive("lr", lr)
        self.l2 = non_negative("l2", l2)
        if self.lr * self.l2 >= 1.0:  # the shrink factor 1 − lr·l2 must stay positive
            raise InvalidParameter("l2", f"l2 must be < 1/lr = {1.0 / self.lr!r}, got {l2!r}")
        self.temperature = positive("temperature", temperature)
        self.label_smoothing = non_negative("label_smoothing", label_smoothing)
        if self.label_smoothing >= 1.0:
            raise InvalidParameter(
                "label_smoothing", f"label_smoothing must be < 1, got {label_smoothing!r}"
            )
        if not math.isfinite(1.0 / self.temperature):
            raise InvalidParameter("temperature", f"temperature is too small, got {temperature!r}")
        super().__init__(dim, n_classes)
        self._f[SCALE] = 1.0

    def _served_t(self) -> tuple[np.ndarray, np.ndarray, float]:
        t = self.temperature
        return self.W, self.b / t, float(self._f[SCALE]) / t

    def _learn(self, batch: Batch, out: np.ndarray, margins: np.ndarray) -> None:
        _learn_kernel(
            batch.indptr, batch.indices, batch.data, batch.y, self.W, self.b, self._c,
            self._f, self.lr, self.l2, self.temperature, self.label_smoothing, out, margins,
        )  # fmt: skip


__all__ = ["MulticlassSoftmax"]
