"""Pegasos (Shalev-Shwartz, Singer, Srebro & Cotter 2007/2011), binary, one example per step.

For every example t (counting from 1), with η = 1/(λt): ``w ← (1 − 1/t)·w``, and if y·s < 1
also ``w += η·y·x``; with ``projection``, then ``w ← min(1, (1/√λ)/‖w‖)·w``.

Bias: the paper's objective has none, so by default ``b = 0`` always; ``bias=True`` learns an
unregularised bias with the same step ``η·y`` on margin violations (neither shrunk nor
projected), a common practical variant.

O(nnz) per example: ``w = scale·v``, so the shrink and the projection only change ``scale``;
``‖v‖²`` is kept incrementally (adding ``a·x`` to ``v`` changes it by ``2a(v·x) + a²‖x‖²``,
both already at hand), which makes the projection O(1). When ``scale`` falls below 1e-10
(after ~1e10 examples, or earlier under projection), ``v`` is renormalised — ``v ← scale·v``,
``scale ← 1``, ``‖v‖²`` recomputed exactly — an O(dim) step that keeps ``v`` from overflowing
and resets the drift of the incremental norm. At t = 1 the shrink factor is 0 and ``w`` is
already zero, so nothing is done.

Thick threshold (``params.thick``): a row with y·s above the margin is not learned — no
shrink, no step — though ``t`` still counts it; a repeat re-applies the hinge step alone
(same η, s read again); the shrink and the projection apply once per learned row.

Counting: an update is any change of ``w``; the shrink changes every non-zero ``w``, so once
anything has been learned every example is an update.

>>> import math
>>> from service.learning.batch import Batch
>>> m = Pegasos(dim=2, lam=0.5, projection=True)
>>> _ = m.learn(Batch.from_rows([([0], [3.0]), ([1], [-2.0])] * 5, [1, 0] * 5))
>>> norm = float(np.linalg.norm(m.serving().W))
>>> norm <= 1 / math.sqrt(0.5) + 1e-12
True
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
    boolean,
    float_slots,
    positive,
)
from service.learning.registry import register

_FLOATS = (*SCALED_FLOATS, "vsq")
_, _, VSQ = float_slots(*_FLOATS)


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _learn_kernel(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    y: np.ndarray,
    v: np.ndarray,
    c: np.ndarray,
    f: np.ndarray,
    lam: float,
    projection: bool,
    bias: bool,
    thick: float,
    repeats: int,
    out: np.ndarray,
    margins: np.ndarray,
) -> None:
    """c = [seen, mistakes, updates]; f = [max_norm, b, scale, vsq]."""
    n = indptr.shape[0] - 1
    seen, mistakes, updates, r2 = load_counters(c, f)
    b, scale, vsq = f[B], f[SCALE], f[VSQ]
    radius2 = 1.0 / lam
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        dot, sq = read_row(indptr, indices, data, i, v)
        s = scale * dot + b
        yi = sign(y[i])
        r2 = max(r2, sq)
        mistakes += record_served(i, s, yi, out, margins)
        t = seen + 1
        if yi * s <= thick:  # learned (always, without a thick threshold)
            eta = 1.0 / (lam * t)
            changed = False
            if t == 1:
                if vsq != 0.0:  # only reachable from a hand-made state: w ← 0·w
                    v[:] = 0.0
                    vsq = 0.0
                    dot = 0.0
                    changed = True
                scale = 1.0
            elif vsq > 0.0:
                scale *= 1.0 - 1.0 / t
                changed = True
            for rep in range(repeats):  # the hinge step; a repeat re-reads the margin
                if rep > 0:
                    dot = row_dot(indptr, indices, data, i, v)
                    s = scale * dot + b
                    if yi * s > thick:
                        break
                if not yi * s < 1.0:
                    break
                a = eta * yi / scale
                for k in range(lo, hi):
                    v[indices[k]] += a * data[k]
                vsq += 2.0 * a * dot + a * a * sq
                if vsq < 0.0:
                    vsq = 0.0
                if bias:
                    b += eta * yi
                changed = changed or sq > 0.0 or bias
            if projection:
                norm2 = scale * scale * vsq
                if norm2 > radius2:
                    scale *= np.sqrt(radius2 / norm2)
            if scale < RENORMALISE_BELOW:
                acc = 0.0
                for j in range(v.shape[0]):
                    v[j] *= scale
                    acc += v[j] * v[j]
                vsq = acc
                scale = 1.0
            if changed:
                updates += 1
        seen += 1
    store_counters(c, f, seen, mistakes, updates, r2)
    f[B], f[SCALE], f[VSQ] = b, scale, vsq


@register
class Pegasos(ScaledLearner):
    """Pegasos with regularisation ``lam`` (> 0), optional ``projection`` and ``bias``."""

    name = "pegasos"
    _float_slots = _FLOATS

    def __init__(
        self,
        dim: int,
        n_classes: int = 2,
        lam: float = 1e-4,
        projection: bool = False,
        bias: bool = False,
    ):
        self.lam = positive("lam", lam)
        self.projection = boolean("projection", projection)
        self.bias = boolean("bias", bias)
        super().__init__(dim, n_classes)

    def _learn(self, batch: Batch, out: np.ndarray, margins: np.ndarray) -> None:
        thick, repeats = self._thick_args()
        _learn_kernel(
            batch.indptr, batch.indices, batch.data, batch.y, self.v, self._c, self._f,
            self.lam, self.projection, self.bias, thick, repeats, out, margins,
        )  # fmt: skip
