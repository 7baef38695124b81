"""The loss pieces of Vowpal Wabbit's update, shared by the binary ``adagrad``
(:mod:`service.learning.adagrad`, whose docstring gives the update and the flows) and its
one-against-all form (:mod:`service.learning.multiclass_adagrad`): ``ℓ'`` and the
importance-invariant flow of each loss, compiled. A module of its own, so that neither form
imports the other (the registry imports every algorithm module)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from service.learning._kernels import FASTMATH

LOSSES = ("logistic", "hinge", "squared", "modified_huber")
LOGISTIC, HINGE, SQUARED, MODIFIED_HUBER = range(4)

#: Below this ``a = lr·q`` the logistic flow is taken to first order (VW's cut-off).
_FIRST_ORDER_BELOW = 1e-6


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def dloss(loss: int, y: float, p: float) -> float:
    """ℓ'(p) for y ∈ {−1, +1}."""
    z = y * p
    if loss == LOGISTIC:  # −y·σ(−z), stably
        if z >= 0.0:
            e = math.exp(-z)
            return -y * e / (1.0 + e)
        return -y / (1.0 + math.exp(z))
    if loss == HINGE:
        return -y if z < 1.0 else 0.0
    if loss == SQUARED:
        return p - y
    if z >= 1.0:  # modified Huber
        return 0.0
    if z >= -1.0:
        return -2.0 * y * (1.0 - z)
    return -4.0 * y


@njit(cache=True, nogil=True, fastmath=FASTMATH, error_model="numpy")
def flow(loss: int, y: float, p: float, a: float) -> float:
    """The margin after the importance-invariant step: the gradient flow
    ``dp/dt = −a·ℓ'(p)`` from ``p`` at ``t = 0``, read at ``t = 1``."""
    z = y * p
    if not a > 0.0:
        return p
    if loss == LOGISTIC:
        e0 = math.exp(z)
        step = a / (1.0 + e0)  # first order
        if a >= _FIRST_ORDER_BELOW and e0 < np.inf:
            # the root of h(t) = t + e^z·(e^t − 1) − a, convex and increasing: from the
            # smaller of two points right of it (h ≥ 0 at a/(1 + e^z) and at log1p(a/e^z)),
            # Newton comes down monotonically, quadratically: ~3 steps; once a step is below
            # 1e-9 of t, the error left is ~1e-18 and it stops
            step = min(step, math.log1p(a / e0))
            for _ in range(60):
                em1 = math.expm1(step)
                delta = (step + e0 * em1 - a) / (1.0 + e0 * (em1 + 1.0))
                step -= delta
                if not delta > 1e-9 * step:
                    break
        return y * (z + step)
    if loss == HINGE:
        return y * min(1.0, z + a) if z < 1.0 else p
    if loss == SQUARED:
        return y + (p - y) * math.exp(-a)
    if z >= 1.0:  # modified Huber
        return p
    if z < -1.0:
        used = (-1.0 - z) / (4.0 * a)  # the time the linear part takes to reach z = −1
        if used >= 1.0:
            return y * (z + 4.0 * a)
        return y * (1.0 - 2.0 * math.exp(-2.0 * a * (1.0 - used)))
    return y * (1.0 - (1.0 - z) * math.exp(-2.0 * a))


__all__ = ["HINGE", "LOGISTIC", "LOSSES", "MODIFIED_HUBER", "SQUARED", "dloss", "flow"]
