"""The one compiled loop behind the perceptron, MIRA and the PA family (binary).

All five share their shape: score ``s = w·x + b`` and ‖x‖² in one pass over the row, count a
mistake against the sign of ``s``, then, when the rule says so, take ``w += τ·y·x`` and
``b += τ·y`` — the bias learned apart with the same step and left out of ‖x‖², as River does.
Only the step size τ differs, so each algorithm's module names its :data:`RULE` and the loop
is written once. The served margin is ``s`` itself; it is written to ``margins[i]`` in the
pass that counts the mistake. A rule is a small integer rather than a callable: a branch on it costs
nothing next to the sparse loops and keeps one compiled signature for every algorithm.

====================  ====================================  ============================
rule                  update when                           τ
====================  ====================================  ============================
``PERCEPTRON``        y·s ≤ 0                               1
``PA``                ℓ = 1 − y·s > 0 and ‖x‖ > 0           ℓ/‖x‖²
``PA1``               ℓ > 0 and ‖x‖ > 0                     min(C, ℓ/‖x‖²)
``PA2``               ℓ > 0                                 ℓ/(‖x‖² + 1/(2C))
``MIRA``              (y·s ≤ 0 or y·s < margin), ‖x‖ > 0    min(C, (1 − y·s)/‖x‖²)
====================  ====================================  ============================

With a thick threshold (``thick`` = m, see :mod:`service.learning._kernels`) the
mistake-driven rules (perceptron, MIRA's ``y·s ≤ 0``) update on ``y·s ≤ m`` instead — the
perceptron with margin of TREC's thick-threshold filters; the PA rules are unchanged (their
own loss already asks for margin 1).
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
from service.learning.batch import Batch
from service.learning.linear import Learner, float_slots

PERCEPTRON, PA, PA1, PA2, MIRA = 0, 1, 2, 3, 4

_FLOATS = ("b",)
(B,) = float_slots(*_FLOATS)


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def learn_additive(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    c: np.ndarray,
    f: np.ndarray,
    rule: int,
    C: float,
    margin: float,
    thick: float,
    repeats: int,
    out: np.ndarray,
    margins: np.ndarray,
) -> None:
    """c = [seen, mistakes, updates]; f = [max_norm, b]; ``out[i]``, ``margins[i]``: the
    mistake flag and served margin of row i."""
    n = indptr.shape[0] - 1
    seen, mistakes, updates, r2 = load_counters(c, f)
    b = f[B]
    half_inv_c = 0.5 / C
    lift = 0.0 if thick == np.inf else thick  # mistake-driven rules: update on y·s ≤ lift
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        s = 0.0
        sq = 0.0
        for k in range(lo, hi):
            v = data[k]
            s += w[indices[k]] * v
            sq += v * v
        s += b
        yi = sign(y[i])
        r2 = max(r2, sq)
        mistakes += record_served(i, s, yi, out, margins)
        changed = False
        for rep in range(repeats):
            if rep > 0:
                s = row_dot(indptr, indices, data, i, w) + b
            ys = yi * s
            if ys > thick:
                break
            tau = 0.0
            if rule == PERCEPTRON:
                if ys <= lift:
                    tau = 1.0
            elif rule == MIRA:
                if (ys <= lift or ys < margin) and sq > 0.0:
                    tau = min(C, (1.0 - ys) / sq)
            else:
                loss = 1.0 - ys
                if loss > 0.0:
                    if rule == PA2:
                        tau = loss / (sq + half_inv_c)
                    elif sq > 0.0:
                        tau = loss / sq
                        if rule == PA1 and tau > C:
                            tau = C
            if not tau > 0.0:
                break  # nothing moves: a repeat would read the same margin
            step = tau * yi
            for k in range(lo, hi):
                w[indices[k]] += step * data[k]
            b += step
            changed = True
        if changed:
            updates += 1
        seen += 1
    store_counters(c, f, seen, mistakes, updates, r2)
    f[B] = b


class AdditiveLearner(Learner):
    """Base of the learners that run :func:`learn_additive`: weights ``w`` and a bias ``b``."""

    RULE = PERCEPTRON
    _float_slots = _FLOATS
    w: np.ndarray
    C: float = 1.0  # the cap (PA-I, MIRA) or slack weight (PA-II); unused by the others
    margin: float = 0.0  # MIRA's aggressive margin; unused by the others

    @property
    def b(self) -> float:
        return float(self._f[B])

    def _learn(self, batch: Batch, out: np.ndarray, margins: np.ndarray) -> None:
        thick, repeats = self._thick_args()
        learn_additive(
            batch.indptr, batch.indices, batch.data, batch.y, self.w, self._c, self._f,
            self.RULE, float(self.C), float(self.margin), thick, repeats, out, margins,
        )  # fmt: skip

    def _served(self) -> tuple[np.ndarray, float]:
        return self.w, self.b
