"""Multi-class passive-aggressive learners (Crammer et al. 2006, §7; Crammer & Singer 2003),
single-constraint form.

With ``r`` the highest-scoring wrong class and ``ℓ = max(0, 1 − (s_y − s_r))``, the update
``W[y] += τ·x, W[r] −= τ·x`` (and ``b[y] += τ, b[r] −= τ``) changes the margin
``s_y − s_r`` by ``2τ‖x‖²``, hence the step
``τ = ℓ/(2‖x‖²)`` (PA), ``min(C, ℓ/(2‖x‖²))`` (PA-I), ``ℓ/(2‖x‖² + 1/(2C))`` (PA-II).
As in the binary family the bias is learned beside the weights and left out of ‖x‖², and an
all-zero ``x`` gives τ = 0 for PA and PA-I.

>>> from service.learning.features import Batch
>>> m = MulticlassPA1(dim=2, n_classes=3, C=1.0)
>>> m.learn(Batch.from_rows([([0], [1.0]), ([0], [1.0])], [2, 2])).tolist()
[True, False]
>>> m.serving().W[:, 0].tolist(), m.serving().b.tolist()   # τ = 1/(2·1) = 0.5
([-0.5, 0.0, 0.5], [-0.5, 0.0, 0.5])
"""

from __future__ import annotations

import numpy as np
from numba import njit

from service.learning._multiclass import MulticlassLearner, add_row, argmax, row_scores, top_wrong
from service.learning.features import Batch
from service.learning.linear import positive
from service.learning.registry import register


@njit(cache=True, nogil=True)
def _learn_kernel(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    y: np.ndarray,
    W: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    f: np.ndarray,
    mode: int,
    C: float,
    out: np.ndarray,
) -> None:
    """c = [seen, mistakes, updates]; f = [max_norm]; mode 0 = PA, 1 = PA-I, 2 = PA-II."""
    n = indptr.shape[0] - 1
    s = np.empty(W.shape[0], dtype=np.float64)
    seen, mistakes, updates = c[0], c[1], c[2]
    r2 = f[0] * f[0]
    half_inv_c = 0.5 / C
    for i in range(n):
        sq = row_scores(indptr, indices, data, i, W, b, 1.0, s)
        if sq > r2:
            r2 = sq
        yi = y[i]
        if argmax(s) != yi:
            out[i] = True
            mistakes += 1
        r = top_wrong(s, yi)
        loss = 1.0 - (s[yi] - s[r])
        if loss > 0.0:
            if mode == 2:
                tau = loss / (2.0 * sq + half_inv_c)
            elif sq > 0.0:
                tau = loss / (2.0 * sq)
                if mode == 1 and tau > C:
                    tau = C
            else:
                tau = 0.0
            if tau > 0.0:
                add_row(indptr, indices, data, i, W, yi, tau)
                add_row(indptr, indices, data, i, W, r, -tau)
                b[yi] += tau
                b[r] -= tau
                updates += 1
        seen += 1
    c[0], c[1], c[2] = seen, mistakes, updates
    f[0] = np.sqrt(r2)


class _MulticlassPABase(MulticlassLearner):
    _mode = 0
    C: float

    def _learn(self, batch: Batch, out: np.ndarray) -> None:
        _learn_kernel(
            batch.indptr, batch.indices, batch.data, batch.y,
            self.W, self.b, self._c, self._f, self._mode, float(self.C), out,
        )  # fmt: skip


@register
class MulticlassPA(_MulticlassPABase):
    """Multi-class PA: the smallest change that puts the true class 1 above the top wrong one."""

    name = "pa"
    _mode = 0

    def __init__(self, dim: int, n_classes: int = 3):
        super().__init__(dim, n_classes)
        self.C = 1.0  # unused by mode 0; keeps the kernel signature one


@register
class MulticlassPA1(_MulticlassPABase):
    """Multi-class PA-I: the step capped at ``C`` (> 0)."""

    name = "pa1"
    _mode = 1

    def __init__(self, dim: int, n_classes: int = 3, C: float = 1.0):
        self.C = positive("C", C)
        super().__init__(dim, n_classes)


@register
class MulticlassPA2(_MulticlassPABase):
    """Multi-class PA-II: a squared slack penalised by ``1/(2C)`` (C > 0)."""

    name = "pa2"
    _mode = 2

    def __init__(self, dim: int, n_classes: int = 3, C: float = 1.0):
        self.C = positive("C", C)
        super().__init__(dim, n_classes)


__all__ = ["MulticlassPA", "MulticlassPA1", "MulticlassPA2"]
