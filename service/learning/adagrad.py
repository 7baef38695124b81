"""Normalised adaptive gradient descent with importance-invariant updates — Vowpal Wabbit's
default learner (``--adaptive --normalized --invariant``), binary.

The learner the spam literature and Vowpal Wabbit's defaults point to: a per-feature step
that adapts to the feature's gradient history (AdaGrad, Duchi et al. 2011) *and* to its
scale (NAG, Ross, Mineiro & Langford 2013), so that unnormalised features (Spambase's run
lengths in the thousands beside frequencies below 1) neither blow the weights up nor starve;
and an update that is the exact solution of the gradient flow over the example
(Karampatziakis & Langford 2011), so that a large step cannot overshoot the label. This is
VW's update, feature for feature (``tests/learning/test_binary_adagrad.py`` checks it
against ``vw`` itself when ``vowpalwabbit`` is installed, and always against a plain numpy
transcription).

The update, for an example (x, y ∈ {−1, +1}) with served margin ``p = w·x + b``:

1. ``d = ℓ'(p)``. If ``d = 0`` (hinge or modified Huber with y·p ≥ 1) nothing else happens —
   no statistic moves, as in VW.
2. For each feature i of x with ``x_i ≠ 0`` (the bias is a feature ``x = 1``):
   ``G_i += d²·x_i²``; if ``|x_i| > s_i``: ``w_i ← w_i·s_i/|x_i|`` (when ``s_i > 0``) and
   ``s_i ← |x_i|``; then ``r_i = 1/(s_i·√G_i)`` (the per-feature rate), ``n += x_i²/s_i²``
   and ``q += x_i²·r_i``.
3. ``T += 1``, ``N += n``, ``m = √(T/N)`` (the global normaliser), ``q ← m·q``: ``q`` is how
   far the margin moves per unit of update (VW's ``pred_per_update``).
4. The update ``u``, with ``a = lr·q`` and ``z = y·p``:

   - ``invariant=False``: ``u = −lr·d`` (the plain gradient step);
   - ``invariant=True``: ``u = y·(z₁ − z)/q``, where ``z₁`` is where the gradient flow
     ``dz/dt = −a·ℓ'(z)`` started at ``z`` stands at ``t = 1``:

     ============== ========================================================================
     logistic       ``z₁ + e^{z₁} = z + e^z + a`` (solved by Newton's method; VW writes it
                    with Lambert's W); for ``a < 1e-6`` the first-order ``z + a/(1 + e^z)``
     hinge          ``z₁ = min(1, z + a)``
     squared        ``z₁ = y − (y − z)·e^{−a}`` in margin units: ``p₁ = y + (p − y)·e^{−a}``
     modified_huber ``z₁ = 1 − (1 − z)·e^{−2a}`` for −1 ≤ z < 1; from z < −1 linear,
                    ``z + 4a``, until z = −1, then the former
     ============== ========================================================================

5. ``w_i += m·u·x_i·r_i`` for every feature (``b`` likewise, with ``x = 1``).

Losses of the margin (z = y·p): ``"logistic"`` log(1 + e^{−z}) (the probability σ(s) is the
model's own, ``link = "calibrated-sigmoid"``); ``"hinge"`` max(0, 1 − z); ``"squared"``
½(p − y)² (VW's default loss is (p − y)², twice this); ``"modified_huber"`` max(0, 1 − z)²
for z ≥ −1, −4z below (Zhang 2004: smooth, and robust to outliers like the hinge).
``bias=False`` drops the bias. ``lr`` is VW's ``-l`` (default 0.5).

The thick threshold (see :mod:`service.learning._kernels`): a row whose served ``y·p`` is
above ``thick`` is not learned at all (like a zero-gradient row); a repeat learns the row
again exactly as a new example would (its statistics ``G``, ``s``, ``T``, ``N`` move again),
though ``examples_seen`` counts it once.

Mistakes are counted against ``p``, the margin served before any of step 2's rescaling. Per
feature, ``w``, ``G`` and ``s`` are interleaved in one (dim, 3) array so that a feature costs
one random memory access. Arithmetic is float64 (VW's is float32 with an approximate inverse
square root, so the two agree to ~1e-4, not bit for bit).

>>> from service.learning.batch import Batch
>>> m = AdaGrad(dim=2)
>>> rows = [([0, 1], [1000.0, 0.01]), ([0, 1], [10.0, 0.02])] * 20
>>> flags = m.learn(Batch.from_rows(rows, [1, 0] * 20))
>>> int(flags[:6].sum()), int(flags[6:].sum())   # learns despite the 1e5 range of scales
(4, 0)

An importance-invariant step cannot overshoot: however large ``lr``, one hinge step on an
example lands its margin on 1 at most (the plain gradient step flies past it):

>>> one = Batch.from_rows([([0], [1.0])], [1])
>>> for invariant in (True, False):
...     m = AdaGrad(dim=1, lr=100.0, loss="hinge", invariant=invariant, bias=False)
...     _ = m.learn(one)
...     print(invariant, round(float(m.decision(one)[0]), 6))
True 1.0
False 100.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numba import njit

from service.learning._adagrad import LOSSES, dloss, flow
from service.learning._kernels import FASTMATH, csr_margins, row_dot, sign
from service.learning.batch import Batch
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

_FLOATS = ("b", "Gb", "N", "T")
B, GB, N, T = float_slots(*_FLOATS)


@njit(cache=True, nogil=True, fastmath=FASTMATH, error_model="numpy")
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
    invariant: bool,
    thick: float,
    repeats: int,
    out: np.ndarray,
    margins: np.ndarray,
) -> None:
    """c = [seen, mistakes, updates]; f = [max_norm, b, Gb, N, T]; wgs[:, 0/1/2] = w, G, s."""
    n = indptr.shape[0] - 1
    seen, mistakes, updates = c[SEEN], c[MISTAKES], c[UPDATES]
    r2 = f[MAX_NORM] * f[MAX_NORM]
    b, gb, big_n, big_t = f[B], f[GB], f[N], f[T]
    longest = 0
    for i in range(n):
        longest = max(longest, indptr[i + 1] - indptr[i])
    rates = np.empty(longest, dtype=np.float64)
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        p = 0.0
        sq = 0.0
        for k in range(lo, hi):  # the served margin, read exactly as decision() does
            x = data[k]
            p += wgs[indices[k], 0] * x
            sq += x * x
        p += b
        yi = sign(y[i])
        if sq > r2:
            r2 = sq
        margins[i] = p
        if (p > 0.0) != (yi > 0.0):
            out[i] = True
            mistakes += 1
        seen += 1
        changed = False
        for rep in range(repeats):
            if rep > 0:  # a repeat: read the margin again
                p = row_dot(indptr, indices, data, i, wgs[:, 0]) + b
            if yi * p > thick:
                break
            d = dloss(loss, yi, p)
            if d == 0.0:
                break
            d2 = d * d
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
                wgs[j, 1] += d2 * x2
                if ax > wgs[j, 2]:
                    if wgs[j, 2] > 0.0:
                        wgs[j, 0] *= wgs[j, 2] / ax
                    wgs[j, 2] = ax
                s_j = wgs[j, 2]
                den = s_j * math.sqrt(wgs[j, 1])  # 0 only on underflow: no step for i then
                rate = 1.0 / den if den > 0.0 else 0.0
                rates[k - lo] = rate
                nx = x / s_j
                norm_x += nx * nx
                q += x2 * rate
            rate_b = 0.0
            if bias:
                gb += d2
                rate_b = 1.0 / math.sqrt(gb) if gb > 0.0 else 0.0
                norm_x += 1.0
                q += rate_b
            if not (q > 0.0 and big_n + norm_x > 0.0):
                break  # nothing can move (an empty row without bias, or underflow)
            big_t += 1.0
            big_n += norm_x
            mult = math.sqrt(big_t / big_n)
            q *= mult
            u = (flow(loss, yi, p, lr * q) - p) / q if invariant else -lr * d
            u *= mult
            for k in range(lo, hi):
                w_step = u * data[k] * rates[k - lo]
                if w_step != 0.0:
                    wgs[indices[k], 0] += w_step
                    changed = True
            if bias and u != 0.0:
                b += u * rate_b
                changed = True
        if changed:
            updates += 1
    c[SEEN], c[MISTAKES], c[UPDATES] = seen, mistakes, updates
    f[MAX_NORM] = np.sqrt(r2)
    f[B], f[GB], f[N], f[T] = b, gb, big_n, big_t


@register
class AdaGrad(Learner):
    """VW's learner: step ``lr`` (> 0), a ``loss`` among logistic/hinge/squared/modified_huber,
    ``invariant`` (importance-invariant) updates, and ``bias``."""

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
        invariant: bool = True,
        bias: bool = True,
    ):
        self.lr = positive("lr", lr)
        self.loss = one_of("loss", loss, LOSSES)
        self.invariant = boolean("invariant", invariant)
        self.bias = boolean("bias", bias)
        self.link = "calibrated-sigmoid" if self.loss == "logistic" else "sigmoid"
        super().__init__(dim, n_classes)

    def _init_arrays(self) -> dict[str, np.ndarray]:
        return {"wgs": np.zeros((self.dim, 3), dtype=np.float64)}

    def _learn(self, batch: Batch, out: np.ndarray, margins: np.ndarray) -> None:
        thick, repeats = self._thick_args()
        _learn_kernel(
            batch.indptr, batch.indices, batch.data, batch.y, self.wgs, self._c, self._f,
            LOSSES.index(self.loss), self.lr, self.bias, self.invariant, thick, repeats, out,
            margins,
        )  # fmt: skip

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Load a state; one saved before the ``T`` slot existed (version 0.1: float slots
        ``b``, ``Gb``, ``N`` only) gets ``T = examples_seen``. That kernel added every
        example's normalised ``|x|²`` to ``N`` and stepped by ``√(t/N)`` with ``t`` the
        examples seen, so this keeps the global normaliser ``√(T/N)`` where it was."""
        if "T" not in state and {"N", "examples_seen"} <= set(state):
            state = {**state, "T": float(state["examples_seen"])}
        super().set_state(state)

    def _served(self) -> tuple[np.ndarray, float]:
        return self.wgs[:, 0], float(self._f[B])

    def decision(self, batch: Batch) -> np.ndarray:
        """Margins read from the strided ``w`` column directly (no O(dim) copy)."""
        _check_indices(batch, self.dim)
        indptr, indices, data = _as_csr(batch)
        return csr_margins(indptr, indices, data, self.wgs[:, 0], float(self._f[B]))


__all__ = ["LOSSES", "AdaGrad", "dloss", "flow"]
