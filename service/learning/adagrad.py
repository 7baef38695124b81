"""Normalised adaptive gradient descent (NAG; Ross, Mineiro & Langford 2013), binary.

The learner the spam literature and Vowpal Wabbit's defaults point to: a per-feature step
that adapts to the feature's gradient history (AdaGrad, Duchi et al. 2011) *and* to its
scale, so that unnormalised features (Spambase's run lengths in the thousands beside
frequencies below 1) neither blow the weights up nor starve. Algorithm 1 of the paper, for
each example with ``t`` counted from 1:

1. for each feature i of x with ``|x_i| > s_i``: ``w_i ← w_i·s_i²/x_i²`` (if ``s_i > 0``),
   ``s_i ← |x_i|`` — the weight is rescaled so the prediction is what it would have been;
2. ``ŷ = w·x + b``; ``N ← N + Σ_i x_i²/s_i²``;
3. for each feature: ``g_i = ℓ'(ŷ)·x_i``, ``G_i ← G_i + g_i²``,
   ``w_i ← w_i − lr·√(t/N)·g_i/(s_i·√G_i)``.

The bias is a constant feature 1 (as in VW), with its own ``G``; ``bias=False`` drops it.
Losses (y ∈ {−1, +1}): ``"logistic"`` (ℓ' = −y·σ(−yŷ); the probability σ(s) is the model's
own, ``link = "calibrated-sigmoid"``), ``"hinge"`` (ℓ' = −y when yŷ < 1) and ``"squared"``
(ℓ' = ŷ − y, VW's default). VW's importance-invariant updates are not included.

Mistakes are counted against the weights as served *before* step 1 (the rescaling is part
of learning from the example). Per feature, ``w``, ``G`` and ``s`` are interleaved in one
(dim, 3) array so that a feature costs one random memory access.

>>> from service.learning.features import Batch
>>> m = AdaGrad(dim=2)
>>> rows = [([0, 1], [1000.0, 0.01]), ([0, 1], [10.0, 0.02])] * 20
>>> flags = m.learn(Batch.from_rows(rows, [1, 0] * 20))
>>> int(flags[:4].sum()), int(flags[4:].sum())   # learns despite the 1e5 range of scales
(3, 0)
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from service.learning._kernels import FASTMATH, csr_margins, row_dot, sign
from service.learning.features import Batch
from service.learning.linear import (
    MAX_NORM,
    MISTAKES,
    SEEN,
    UPDATES,
    Learner,
    _as_csr,
    _check_indices,
    boolean,
    float_slots,
    one_of,
    positive,
)
from service.learning.registry import register

_FLOATS = ("b", "Gb", "N")
B, GB, N = float_slots(*_FLOATS)

_LOSSES = ("logistic", "hinge", "squared")


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _dloss(loss: int, y: float, p: float) -> float:
    """ℓ'(ŷ) for y ∈ {−1, +1}: 0 logistic, 1 hinge, 2 squared."""
    if loss == 0:
        z = y * p  # σ(−z), stably
        if z >= 0.0:
            e = math.exp(-z)
            return -y * e / (1.0 + e)
        return -y / (1.0 + math.exp(z))
    if loss == 1:
        return -y if y * p < 1.0 else 0.0
    return p - y


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _learn_kernel(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    y: np.ndarray,
    wgs: np.ndarray,
    c: np.ndarray,
    f: np.ndarray,
    loss: int,
    lr: float,
    bias: bool,
    thick: float,
    repeats: int,
    out: np.ndarray,
    margins: np.ndarray,
) -> None:
    """c = [seen, mistakes, updates]; f = [max_norm, b, Gb, N]; wgs[:, 0/1/2] = w, G, s."""
    n = indptr.shape[0] - 1
    seen, mistakes, updates = c[SEEN], c[MISTAKES], c[UPDATES]
    r2 = f[MAX_NORM] * f[MAX_NORM]
    b, gb, big_n = f[B], f[GB], f[N]
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        served = 0.0
        sq = 0.0
        for k in range(lo, hi):  # the served margin first, read exactly as decision() does
            x = data[k]
            served += wgs[indices[k], 0] * x
            sq += x * x
        served += b
        p = b
        changed = False
        for k in range(lo, hi):
            j = indices[k]
            x = data[k]
            ax = abs(x)
            if ax > wgs[j, 2]:
                if wgs[j, 2] > 0.0 and wgs[j, 0] != 0.0:
                    ratio = wgs[j, 2] / ax
                    wgs[j, 0] *= ratio * ratio
                    changed = True
                wgs[j, 2] = ax
            p += wgs[j, 0] * x
            if ax > 0.0:
                nx = x / wgs[j, 2]
                big_n += nx * nx
        if bias:
            big_n += 1.0
        yi = sign(y[i])
        if sq > r2:
            r2 = sq
        margins[i] = served
        if (served > 0.0) != (yi > 0.0):
            out[i] = True
            mistakes += 1
        seen += 1
        if yi * served <= thick and big_n > 0.0:  # learned (always, without a thick threshold)
            rate = lr * math.sqrt(seen / big_n)
            for rep in range(repeats):
                if rep > 0:
                    p = row_dot(indptr, indices, data, i, wgs[:, 0]) + b
                    if yi * p > thick:
                        break
                d = _dloss(loss, yi, p)
                if d == 0.0:
                    break
                for k in range(lo, hi):
                    j = indices[k]
                    g = d * data[k]
                    if g != 0.0:
                        wgs[j, 1] += g * g
                        wgs[j, 0] -= rate * g / (wgs[j, 2] * math.sqrt(wgs[j, 1]))
                        changed = True
                if bias:
                    gb += d * d
                    b -= rate * d / math.sqrt(gb)
                    changed = True
        if changed:
            updates += 1
    c[SEEN], c[MISTAKES], c[UPDATES] = seen, mistakes, updates
    f[MAX_NORM] = np.sqrt(r2)
    f[B], f[GB], f[N] = b, gb, big_n


@register
class AdaGrad(Learner):
    """NAG with step ``lr`` (> 0), a ``loss`` among logistic/hinge/squared, and ``bias``."""

    name = "adagrad"
    _arrays = ("wgs",)
    _float_slots = _FLOATS
    wgs: np.ndarray

    def __init__(
        self,
        dim: int,
        n_classes: int = 2,
        lr: float = 0.5,
        loss: str = "logistic",
        bias: bool = True,
    ):
        self.lr = positive("lr", lr)
        self.loss = one_of("loss", loss, _LOSSES)
        self.bias = boolean("bias", bias)
        self.link = "calibrated-sigmoid" if self.loss == "logistic" else "sigmoid"
        super().__init__(dim, n_classes)

    def _init_arrays(self) -> dict[str, np.ndarray]:
        return {"wgs": np.zeros((self.dim, 3), dtype=np.float64)}

    def _learn(self, batch: Batch, out: np.ndarray, margins: np.ndarray) -> None:
        thick, repeats = self._thick_args()
        _learn_kernel(
            batch.indptr, batch.indices, batch.data, batch.y, self.wgs, self._c, self._f,
            _LOSSES.index(self.loss), self.lr, self.bias, thick, repeats, out, margins,
        )  # fmt: skip

    def _served(self) -> tuple[np.ndarray, float]:
        return self.wgs[:, 0], float(self._f[B])

    def decision(self, batch: Batch) -> np.ndarray:
        """Margins read from the strided ``w`` column directly (no O(dim) copy)."""
        _check_indices(batch, self.dim)
        indptr, indices, data = _as_csr(batch)
        return csr_margins(indptr, indices, data, self.wgs[:, 0], float(self._f[B]))
