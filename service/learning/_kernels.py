"""Compiled loops shared by every linear learner: sparse margins and dot products.

Each algorithm keeps its update kernel in its own module (the perceptron, MIRA and the PA
family share one, in ``_additive.py``; Pegasos and logistic regression share their base in
``_scaled.py``); what lives here is what every one of them (and the serving path) needs:
``w·x + b`` over a whole CSR batch, and the small inline pieces of a kernel's row loop.

Every binary kernel has the same shape (see :class:`~service.learning.linear.Learner`):
for each row, read the served margin ``s`` (and ‖x‖²), write ``margins[i] = s`` and the
mistake flag ``out[i]`` from it, then learn. Learning is gated by the *thick threshold*
(``thick``, ``repeats``): the row is learned only while ``y·s ≤ thick`` (the served score
wrong or within ``thick`` of the threshold), up to ``repeats`` times, ``s`` read again
between repeats; ``thick = +inf, repeats = 1`` (the default) learns every row once.
Kernels take plain arrays (``indptr`` int64, ``indices`` int32, ``data`` float64) so
numba compiles them once per dtype signature and caches the machine code on disk.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Floating-point freedoms the kernels take: re-association (so LLVM may vectorise the sparse
#: dot products with several accumulators / gathers) and FMA contraction. Neither assumes the
#: absence of NaN or inf. Results stay deterministic for a given row (the summation order
#: depends only on the row's length), so a batch still equals its rows learned one by one.
FASTMATH = {"reassoc", "contract"}

#: Positions in ``Learner._c`` (int64) that every kernel updates: examples seen, mistakes,
#: updates (a learner's own int slots follow).
SEEN, MISTAKES, UPDATES = 0, 1, 2
#: Position in ``Learner._f`` (float64) of R = max ‖x‖ (a learner's float slots follow).
MAX_NORM = 0


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def csr_margins(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, w: np.ndarray, b: float
) -> np.ndarray:
    """``s_i = w·x_i + b`` for every row of a CSR batch (binary weights ``w`` of shape (dim,))."""
    n = indptr.shape[0] - 1
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            s += w[indices[k]] * data[k]
        out[i] = s + b
    return out


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def csr_margins_scaled_diff(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    wu: np.ndarray,
    bw: float,
    bu: float,
    c: float,
) -> np.ndarray:
    """``s_i = (w·x_i + bw) − (u·x_i + bu)/c``: margins of ``w − u/c`` without forming it,
    with ``w = wu[:, 0]`` and ``u = wu[:, 1]`` interleaved.

    The averaged perceptron serves ``w − u/c`` (lazy averaging); this reads it in O(nnz).
    With ``c == 0`` (nothing learned yet) the second term is left out.
    """
    n = indptr.shape[0] - 1
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        sw = 0.0
        su = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            sw += wu[j, 0] * data[k]
            su += wu[j, 1] * data[k]
        if c > 0.0:
            out[i] = (sw + bw) - (su + bu) / c
        else:
            out[i] = sw + bw
    return out


@njit(cache=True, nogil=True, fastmath=FASTMATH)
def csr_margins_multi(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, W: np.ndarray, b: np.ndarray
) -> np.ndarray:
    """``S[i, k] = W[k]·x_i + b[k]`` for multi-class weights ``W`` of shape (K, dim)."""
    n = indptr.shape[0] - 1
    K = W.shape[0]
    out = np.empty((n, K), dtype=np.float64)
    for i in range(n):
        for r in range(K):
            s = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                s += W[r, indices[k]] * data[k]
            out[i, r] = s + b[r]
    return out


@njit(cache=True, nogil=True, fastmath=FASTMATH, inline="always")
def row_dot(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, i: int, w: np.ndarray
) -> float:
    """``w·x_i`` for one row (the re-read of a thick-threshold repeat)."""
    s = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        s += w[indices[k]] * data[k]
    return s


@njit(cache=True, nogil=True, fastmath=FASTMATH, inline="always")
def row_dot_pair(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, i: int, wu: np.ndarray
) -> tuple[float, float, float]:
    """``(wu[:, 0]·x_i, wu[:, 1]·x_i, ‖x_i‖²)`` in one pass over the row, for the learners
    that keep two interleaved weight vectors (the averaged perceptron's ``w`` and sum, the
    pocket's current and pocket weights)."""
    s0 = 0.0
    s1 = 0.0
    sq = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        j = indices[k]
        v = data[k]
        s0 += wu[j, 0] * v
        s1 += wu[j, 1] * v
        sq += v * v
    return s0, s1, sq


@njit(cache=True, nogil=True, inline="always")
def sign(label: int) -> float:
    """The label as y ∈ {−1, +1} (class index 1 is the positive class)."""
    return 1.0 if label == 1 else -1.0


@njit(cache=True, nogil=True, inline="always")
def record_served(i: int, s: float, yi: float, out: np.ndarray, margins: np.ndarray) -> int:
    """Write row ``i``'s served margin ``s`` to ``margins[i]`` and, when its sign is not the
    label's ``yi`` (±1), the mistake flag ``out[i]``; 1 for a mistake, else 0 (what every
    binary kernel does before it learns the row)."""
    margins[i] = s
    if (s > 0.0) != (yi > 0.0):
        out[i] = True
        return 1
    return 0


@njit(cache=True, nogil=True, inline="always")
def load_counters(c: np.ndarray, f: np.ndarray) -> tuple[int, int, int, float]:
    """A kernel's running counters from the learner's slots: examples seen, mistakes,
    updates and R² (the largest ‖x‖² so far)."""
    return c[SEEN], c[MISTAKES], c[UPDATES], f[MAX_NORM] * f[MAX_NORM]


@njit(cache=True, nogil=True, inline="always")
def store_counters(
    c: np.ndarray, f: np.ndarray, seen: int, mistakes: int, updates: int, r2: float
) -> None:
    """Write a kernel's counters back to the learner's slots (R as ``max_norm``)."""
    c[SEEN], c[MISTAKES], c[UPDATES] = seen, mistakes, updates
    f[MAX_NORM] = np.sqrt(r2)
