"""Passive-aggressive learners PA, PA-I and PA-II (Crammer et al. 2006), binary.

With ℓ = max(0, 1 − y·s): τ = ℓ/‖x‖² (PA), min(C, ℓ/‖x‖²) (PA-I), ℓ/(‖x‖² + 1/(2C)) (PA-II);
then ``w += τ·y·x`` and ``b += τ·y``. As in River's ``PAClassifier`` (which the tests match
example for example), the bias is learned beside the weights but left out of ‖x‖², and an
all-zero ``x`` gives τ = 0 for PA and PA-I (PA-II's ``1/(2C)`` keeps it finite).

>>> from service.learning.features import Batch
>>> m = PA1(dim=2, C=0.1)
>>> m.learn(Batch.from_rows([([0], [2.0]), ([0], [2.0])], [1, 1])).tolist()
[True, False]
>>> m.w.tolist(), m.b, m.updates
([0.4, 0.0], 0.2, 2)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from service.learning._kernels import FASTMATH
from service.learning.features import Batch
from service.learning.linear import Learner, positive
from service.learning.registry import register


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _learn_kernel(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    c: np.ndarray,
    f: np.ndarray,
    mode: int,
    C: float,
    out: np.ndarray,
) -> None:
    """c = [seen, mistakes, updates]; f = [max_norm, b]; mode 0 = PA, 1 = PA-I, 2 = PA-II."""
    n = indptr.shape[0] - 1
    seen, mistakes, updates = c[0], c[1], c[2]
    r2 = f[0] * f[0]
    b = f[1]
    half_inv_c = 0.5 / C
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        s = 0.0
        sq = 0.0
        for k in range(lo, hi):
            v = data[k]
            s += w[indices[k]] * v
            sq += v * v
        s += b
        yi = 1.0 if y[i] == 1 else -1.0
        if sq > r2:
            r2 = sq
        if (s > 0.0) != (yi > 0.0):
            out[i] = True
            mistakes += 1
        loss = 1.0 - yi * s
        if loss > 0.0:
            if mode == 2:
                tau = loss / (sq + half_inv_c)
            elif sq > 0.0:
                tau = loss / sq
                if mode == 1 and tau > C:
                    tau = C
            else:
                tau = 0.0
            if tau > 0.0:
                step = tau * yi
                for k in range(lo, hi):
                    w[indices[k]] += step * data[k]
                b += step
                updates += 1
        seen += 1
    c[0], c[1], c[2] = seen, mistakes, updates
    f[0] = np.sqrt(r2)
    f[1] = b


class _PABase(Learner):
    _float_slots = ("b",)
    _mode = 0
    w: np.ndarray
    C: float

    @property
    def b(self) -> float:
        return float(self._f[1])

    def _learn(self, batch: Batch, out: np.ndarray) -> None:
        _learn_kernel(
            batch.indptr, batch.indices, batch.data, batch.y,
            self.w, self._c, self._f, self._mode, float(self.C), out,
        )  # fmt: skip

    def _served(self) -> tuple[np.ndarray, float]:
        return self.w, self.b


@register
class PA(_PABase):
    """PA: the closest weights that classify the example with margin 1 (no C; τ = ℓ/‖x‖²)."""

    name = "pa"
    _mode = 0

    def __init__(self, dim: int, n_classes: int = 2):
        super().__init__(dim, n_classes)
        self.C = 1.0  # unused by mode 0; keeps the kernel signature one


@register
class PA1(_PABase):
    """PA-I: the step capped at ``C`` (> 0), robust to label noise."""

    name = "pa1"
    _mode = 1

    def __init__(self, dim: int, n_classes: int = 2, C: float = 1.0):
        self.C = positive("C", C)
        super().__init__(dim, n_classes)


@register
class PA2(_PABase):
    """PA-II: a squared slack penalised by ``1/(2C)`` (C > 0)."""

    name = "pa2"
    _mode = 2

    def __init__(self, dim: int, n_classes: int = 2, C: float = 1.0):
        self.C = positive("C", C)
        super().__init__(dim, n_classes)
