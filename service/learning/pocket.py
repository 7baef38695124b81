"""Gallant's pocket algorithm with ratchet (Gallant 1990), binary, online.

A perceptron ``w, b`` learns as usual; the model *serves* the pocket ``wp, bp``: the weights
with the longest run of consecutive correct predictions so far. Mistakes are counted against
the pocket (what is served); ``updates`` counts changes of the learning weights ``w``.

The ratchet. Gallant's ratchet replaces the pocket only if the new weights also classify
more *training examples* correctly than the pocket does — a full pass, impossible on a
stream. The online check used here compares the two on the examples both have seen since
``w`` last changed: the pocket is replaced when ``w``'s current run is longer than the
pocket's run **and** the pocket made at least one mistake on that window (where ``w`` made
none), so the pocket only ever gives way to weights that did strictly better on the same
examples.

Cost. Both margins are read per example, O(nnz). Copying ``w`` into the pocket is O(dim), so
it is done lazily: when ``w`` wins, the pocket is marked "is the current ``w``" (O(1)) and the
copy happens only when ``w`` next changes — at most one O(dim) copy per pocket change.

>>> from service.learning.batch import Batch
>>> m = Pocket(dim=2)
>>> rows = [([0], [1.0])] * 2 + [([1], [1.0])] * 4
>>> m.learn(Batch.from_rows(rows, [1, 1, 0, 0, 0, 0])).tolist()
[True, True, True, True, True, False]

The pocket lags: it took ``w = (1, -1)`` only once that run (2 correct) beat the pocket's
run (1) on examples the pocket got wrong; the run has grown to 3 since.

>>> m.w.tolist(), m.serving().W.tolist(), m.get_state()["pocket_run"]
([1.0, -1.0], [1.0, -1.0], 3)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from service.learning._kernels import (
    FASTMATH,
    load_counters,
    record_served,
    row_dot_pair,
    sign,
    store_counters,
)
from service.learning.batch import Batch
from service.learning.linear import (
    Learner,
    float_slots,
    int_slots,
)
from service.learning.registry import register

_INTS = ("run", "pocket_run", "pocket_errors", "current")
RUN, POCKET_RUN, POCKET_ERRORS, CURRENT = int_slots(*_INTS)
_FLOATS = ("b", "bp")
B, BP = float_slots(*_FLOATS)


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def _learn_kernel(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    y: np.ndarray,
    ww: np.ndarray,
    c: np.ndarray,
    f: np.ndarray,
    thick: float,
    repeats: int,
    out: np.ndarray,
    margins: np.ndarray,
) -> None:
    """c = [seen, mistakes, updates, run, pocket_run, pocket_errors, current];
    f = [max_norm, b, bp]."""
    n = indptr.shape[0] - 1
    seen, mistakes, updates, r2 = load_counters(c, f)
    run, prun, perrs, current = c[RUN], c[POCKET_RUN], c[POCKET_ERRORS], c[CURRENT]
    b = f[B]
    bp = f[BP]
    lift = 0.0 if thick == np.inf else thick  # the perceptron's rule: update on y·sw ≤ lift
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        sw, sp, sq = row_dot_pair(indptr, indices, data, i, ww)
        sw += b
        sp += bp
        served = sw if current == 1 else sp
        yi = sign(y[i])
        r2 = max(r2, sq)
        if record_served(i, served, yi, out, margins):
            mistakes += 1
            if current == 0:
                perrs += 1
        changed = False
        in_band = yi * served <= thick  # else not learned: no step, no run bookkeeping
        for rep in range(repeats):
            if rep > 0:
                sw, sp, sq = row_dot_pair(indptr, indices, data, i, ww)
                sw += b
                sp += bp
                served = sw if current == 1 else sp
            if yi * served > thick or yi * sw > lift:
                break
            if current == 1:  # the pocket keeps the weights about to change: copy them now
                ww[:, 1] = ww[:, 0]
                bp = b
                current = 0
            for k in range(lo, hi):
                ww[indices[k], 0] += yi * data[k]
            b += yi
            changed = True
        if changed:
            updates += 1
            run = 0
            perrs = 0
        elif not in_band:
            pass
        elif yi * sw > 0.0:  # w right: its run goes on
            run += 1
            if current == 1:
                prun = run
            elif run > prun and perrs > 0:
                current = 1
                prun = run
        else:  # w wrong, yet not moved (a thick threshold's margin-lifted rule did not fire)
            run = 0
            perrs = 0
        seen += 1
    store_counters(c, f, seen, mistakes, updates, r2)
    c[RUN], c[POCKET_RUN], c[POCKET_ERRORS], c[CURRENT] = run, prun, perrs, current
    f[B] = b
    f[BP] = bp


@register
class Pocket(Learner):
    """A perceptron serving its best-run weights (with the online ratchet); no
    hyper-parameters."""

    name = "pocket"
    _arrays = ("ww",)
    _int_slots = _INTS
    _float_slots = _FLOATS
    ww: np.ndarray

    def __init__(self, dim: int, n_classes: int = 2):
        super().__init__(dim, n_classes)
        self._c[CURRENT] = 1  # the pocket starts as the (zero) current weights

    def _init_arrays(self) -> dict[str, np.ndarray]:
        """``w`` and the pocket interleaved, shape (dim, 2): both weights of a feature share a
        cache line, so a row costs one random memory access per feature, not two."""
        return {"ww": np.zeros((self.dim, 2), dtype=np.float64)}

    @property
    def w(self) -> np.ndarray:
        """The learning (perceptron) weights (a view)."""
        return self.ww[:, 0]

    @property
    def wp(self) -> np.ndarray:
        """The pocket, when it is not the current ``w`` (a view)."""
        return self.ww[:, 1]

    def _learn(self, batch: Batch, out: np.ndarray, margins: np.ndarray) -> None:
        thick, repeats = self._thick_args()
        _learn_kernel(
            batch.indptr, batch.indices, batch.data, batch.y,
            self.ww, self._c, self._f, thick, repeats, out, margins,
        )  # fmt: skip

    def _served(self) -> tuple[np.ndarray, float]:
        if self._c[CURRENT] == 1:
            return self.w, float(self._f[B])
        return self.wp, float(self._f[BP])
