"""Progressive quality of served scores: ROC AUC and log loss, over all examples and a window.

A :class:`QualityTracker` is fed, batch after batch, the margin each example was *served*
with just before it was learned (``Learner.learn(batch, margins=…)``) and its label. It keeps

- **ROC AUC over every example so far**, from a fixed histogram of the margins (O(1) memory,
  an O(1) update per example). The estimate counts a (positive, negative) pair in different
  buckets exactly (the bucket map is monotone) and a pair in the same bucket as a tie (½).
  Only same-bucket pairs can be wrong, each by at most ½, so

      |auc − exact AUC| ≤ auc_error_bound = Σ_b P_b·N_b / (2·P·N)

  over the buckets ``b`` other than the one that holds exactly 0.0 (those pairs are true
  ties). ``auc_error_bound`` is computed from the same histogram and reported with the AUC.
  The grid: 0.0 alone; ``2·HALF`` log-spaced buckets for |s| in [S_MIN, S_MAX] (each
  bucket spans a factor (S_MAX/S_MIN)^(1/HALF) ≈ 1.0013 of |s|, i.e. 0.13 %), with
  anything smaller or larger in the end buckets. On real text streams the bound is below
  1e-4 and the actual error 10–100 times smaller (``tests/learning/test_quality.py`` checks
  the bound).
- **ROC AUC over the last ``window`` examples**, exact (rank statistics over a ring buffer).
- **log loss of the served score**, cumulative and over the window. The served score of a
  binary model is ``p = σ(s)`` (the ``sigmoid`` and ``calibrated-sigmoid`` links alike);
  per example ``ℓ = −log p`` for a positive, ``−log(1 − p)`` for a negative, computed
  stably as ``softplus(∓s)`` and clipped to ``[−log(1 − 1e-15), −log 1e-15]`` — that is,
  ``p`` is clipped to ``[1e-15, 1 − 1e-15]`` (so one confident mistake costs at most
  34.5 nats, and a margin of 1e6 does not dominate the mean).

The update is one sequential compiled loop, so the state after a stream does not depend on how
it was cut into batches: ``evaluate`` and the worker reach bit-identical states.
:meth:`get_state`/:meth:`set_state` round-trip exactly (the histogram is stored sparse).

>>> t = QualityTracker(window=3)
>>> t.update(np.array([2.0, -1.0, 0.5, -3.0]), np.array([1, 0, 0, 0]))
>>> t.auc, t.rolling_auc  # window: the last 3 examples (-1.0 neg, 0.5 neg, -3.0 neg)
(1.0, None)
>>> round(t.log_loss, 4)
0.3657
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numba import njit

#: Histogram grid: |s| in [S_MIN, S_MAX] cut into HALF log-spaced buckets per sign.
S_MIN = 1e-4
S_MAX = 1e5
HALF = 16383  # so that both classes' buckets index as uint16 in the state
ZERO = HALF  # the bucket of s == 0.0 exactly
N_BUCKETS = 2 * HALF + 1
_SCALE = HALF / math.log(S_MAX / S_MIN)
_LOG_MIN = math.log(S_MIN)

#: Probabilities are clipped to [EPS, 1 − EPS] for the log loss.
EPS = 1e-15
LOSS_MAX = -math.log(EPS)
LOSS_MIN = -math.log1p(-EPS)

#: Default length of the rolling window, in examples.
WINDOW = 1000

LINKS = ("sigmoid", "calibrated-sigmoid")


@njit(cache=True, nogil=True)
def _bucket(s: float) -> int:
    if s == 0.0 or s != s:  # 0.0 (and a NaN, which predicts like 0) in the middle
        return ZERO
    a = abs(s)
    if a <= S_MIN:
        k = 0
    elif a >= S_MAX:
        k = HALF - 1
    else:
        k = min(HALF - 1, int((math.log(a) - _LOG_MIN) * _SCALE))
    return ZERO + 1 + k if s > 0 else ZERO - 1 - k


@njit(cache=True, nogil=True)
def _loss(s: float, positive: bool) -> float:
    z = -s if positive else s  # ℓ = softplus(z)
    if z != z:
        v = math.log(2.0)
    elif z > 0:
        v = z + math.log1p(math.exp(-z))
    else:
        v = math.log1p(math.exp(z))
    return min(LOSS_MAX, max(LOSS_MIN, v))


@njit(cache=True, nogil=True)
def _update(
    margins: np.ndarray,
    y: np.ndarray,
    hist: np.ndarray,
    ring_s: np.ndarray,
    ring_y: np.ndarray,
    ints: np.ndarray,
    floats: np.ndarray,
) -> None:
    """One sequential pass: histogram, ring buffer and loss sum. ``ints`` = (n, ring next
    slot, ring length); ``floats`` = (loss sum,)."""
    w = ring_s.shape[0]
    total = floats[0]
    n, pos, length = ints[0], ints[1], ints[2]
    for i in range(margins.shape[0]):
        s = margins[i]
        p = y[i] == 1
        hist[1 if p else 0, _bucket(s)] += 1
        total += _loss(s, p)
        n += 1
        if w > 0:
            ring_s[pos] = s
            ring_y[pos] = 1 if p else 0
            pos = pos + 1 if pos + 1 < w else 0
            if length < w:
                length += 1
    floats[0] = total
    ints[0], ints[1], ints[2] = n, pos, length


@njit(cache=True, nogil=True)
def _hist_auc(hist: np.ndarray) -> tuple[float, float, float, float]:
    """(pairs ordered right + ½ ties, same-bucket pairs off the zero bucket, P, N)."""
    neg_below = 0.0
    right = 0.0
    same = 0.0
    P = 0.0
    N = 0.0
    for b in range(hist.shape[1]):
        nb = float(hist[0, b])
        pb = float(hist[1, b])
        right += pb * (neg_below + 0.5 * nb)
        if b != ZERO:
            same += pb * nb
        neg_below += nb
        P += pb
        N += nb
    return right, same, P, N


@njit(cache=True, nogil=True)
def _window_loss(ring_s: np.ndarray, ring_y: np.ndarray, start: int, length: int) -> float:
    """The window's mean loss, summed oldest first (so it is independent of batching)."""
    w = ring_s.shape[0]
    total = 0.0
    for j in range(length):
        i = (start + j) % w
        total += _loss(ring_s[i], ring_y[i] == 1)
    return total / length


def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """Exact area under the ROC curve of ``scores`` for the boolean labels ``positive``.

    The Mann–Whitney statistic: ``(R₊ − P(P+1)/2) / (P·N)`` with ``R₊`` the sum of the
    positives' ranks, ties sharing their average rank (so a tie counts one half). None when
    one class is absent.

    >>> roc_auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([False, False, True, True]))
    0.75
    >>> roc_auc(np.array([1.0, 1.0]), np.array([False, True]))
    0.5
    """
    scores = np.asarray(scores, dtype=np.float64)
    pos = np.asarray(positive, dtype=bool)
    n_pos = int(pos.sum())
    n_neg = int(pos.size - n_pos)
    if n_pos == 0 or n_neg == 0:
        return None
    order = np.argsort(scores, kind="mergesort")
    s = scores[order]
    # average ranks (1-based) over runs of equal scores
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    ends = np.concatenate((starts[1:], [s.size]))
    avg = (starts + ends + 1) / 2.0
    ranks = np.empty(s.size, dtype=np.float64)
    ranks[order] = np.repeat(avg, ends - starts)
    r_pos = float(ranks[pos].sum())
    return (r_pos - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


STATE_KEYS = ("window", "examples", "loss_sum", "buckets", "counts", "window_margins",
              "window_labels")  # fmt: skip


class QualityTracker:
    """Progressive ROC AUC and log loss of a binary model's served scores (module docstring).

    ``window``: the rolling figures cover the last ``window`` examples (≥ 1).
    """

    def __init__(self, window: int = WINDOW) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an integer >= 1, got {window!r}")
        self.window = window
        self._hist = np.zeros((2, N_BUCKETS), dtype=np.int64)
        self._ring_s = np.zeros(window, dtype=np.float64)
        self._ring_y = np.zeros(window, dtype=np.int8)
        self._ints = np.zeros(3, dtype=np.int64)  # examples, ring next slot, ring length
        self._floats = np.zeros(1, dtype=np.float64)  # loss sum

    # ---- feeding ------------------------------------------------------------------------
    def update(self, margins: np.ndarray, y: np.ndarray, link: str = "sigmoid") -> None:
        """Add a batch in order: served margins (n,) and class indices (n,), 1 = positive."""
        if link not in LINKS:
            raise ValueError(f"quality is tracked for the links {list(LINKS)}, not {link!r}")
        s = np.ascontiguousarray(margins, dtype=np.float64)
        labels = np.ascontiguousarray(y, dtype=np.int32)
        if s.ndim != 1 or labels.shape != s.shape:
            raise ValueError(f"margins {s.shape} and labels {labels.shape} must be (n,) alike")
        if s.size:
            _update(s, labels, self._hist, self._ring_s, self._ring_y, self._ints, self._floats)

    # ---- figures ------------------------------------------------------------------------
    @property
    def examples(self) -> int:
        return int(self._ints[0])

    def _auc_parts(self) -> tuple[float | None, float | None]:
        right, same, P, N = _hist_auc(self._hist)
        if P == 0 or N == 0:
            return None, None
        return right / (P * N), same / (2.0 * P * N)

    @property
    def auc(self) -> float | None:
        """ROC AUC over every example so far (None while one class is absent)."""
        return self._auc_parts()[0]

    @property
    def auc_error_bound(self) -> float | None:
        """A proven bound on ``|auc − exact AUC|`` (module docstring)."""
        return self._auc_parts()[1]

    def _window(self) -> tuple[np.ndarray, np.ndarray]:
        """The window's margins and labels, oldest first."""
        length, nxt = int(self._ints[2]), int(self._ints[1])
        start = (nxt - length) % self.window
        idx = (start + np.arange(length)) % self.window
        return self._ring_s[idx], self._ring_y[idx]

    @property
    def rolling_auc(self) -> float | None:
        """Exact ROC AUC over the last ``window`` examples (None while one class is absent)."""
        s, y = self._window()
        return roc_auc(s, y == 1) if s.size else None

    @property
    def log_loss(self) -> float | None:
        """Mean log loss (nats) of the served scores so far; None before any example."""
        n = self.examples
        return float(self._floats[0]) / n if n else None

    @property
    def rolling_log_loss(self) -> float | None:
        """Mean log loss over the last ``window`` examples; None before any example."""
        length = int(self._ints[2])
        if not length:
            return None
        start = (int(self._ints[1]) - length) % self.window
        return float(_window_loss(self._ring_s, self._ring_y, start, length))

    def summary(self) -> dict[str, Any]:
        """The figures, JSON-safe: ``auc``, ``auc_error_bound``, ``rolling_auc``, ``log_loss``,
        ``rolling_log_loss``, ``examples``, ``window``."""
        auc, bound = self._auc_parts()
        return {
            "auc": auc,
            "auc_error_bound": bound,
            "rolling_auc": self.rolling_auc,
            "log_loss": self.log_loss,
            "rolling_log_loss": self.rolling_log_loss,
            "examples": self.examples,
            "window": self.window,
        }

    # ---- state --------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """A compact, exact state: the non-zero histogram buckets, the window oldest first,
        the example count and the loss sum."""
        flat = self._hist.reshape(-1)
        nz = np.flatnonzero(flat)
        counts = flat[nz]
        small = not counts.size or int(counts.max()) < 1 << 32
        s, y = self._window()
        return {
            "window": self.window,
            "examples": int(self._ints[0]),
            "loss_sum": float(self._floats[0]),
            "buckets": nz.astype(np.uint16 if flat.size <= 1 << 16 else np.uint32),
            "counts": counts.astype(np.uint32 if small else np.int64),
            "window_margins": s.copy(),
            "window_labels": y.astype(np.int8),
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Load :meth:`get_state`'s output (checked first: a bad state changes nothing);
        ``ValueError`` if it is not one."""
        missing = sorted(set(STATE_KEYS) - set(state))
        if missing:
            raise ValueError(f"quality state lacks {missing}")
        window = int(state["window"])
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        buckets = np.asarray(state["buckets"]).astype(np.int64)
        counts = np.asarray(state["counts"]).astype(np.int64)
        s = np.asarray(state["window_margins"], dtype=np.float64)
        y = np.asarray(state["window_labels"]).astype(np.int8)
        examples = int(state["examples"])
        if buckets.shape != counts.shape or buckets.ndim != 1:
            raise ValueError("quality state: buckets and counts must be 1-d alike")
        if buckets.size and (buckets.min() < 0 or buckets.max() >= 2 * N_BUCKETS):
            raise ValueError("quality state: a bucket is out of range")
        if s.shape != y.shape or s.ndim != 1 or s.size > window:
            raise ValueError("quality state: window margins and labels do not fit the window")
        if int(counts.sum()) != examples or (counts < 0).any():
            raise ValueError("quality state: the histogram does not add up to the examples")
        hist = np.zeros(2 * N_BUCKETS, dtype=np.int64)
        hist[buckets] = counts
        ring_s = np.zeros(window, dtype=np.float64)
        ring_y = np.zeros(window, dtype=np.int8)
        ring_s[: s.size], ring_y[: s.size] = s, y
        self.window = window
        self._hist = hist.reshape(2, N_BUCKETS)
        self._ring_s, self._ring_y = ring_s, ring_y
        self._ints = np.array([examples, s.size % window, s.size], dtype=np.int64)
        self._floats = np.array([float(state["loss_sum"])], dtype=np.float64)

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> QualityTracker:
        t = cls()
        t.set_state(state)
        return t


__all__ = ["EPS", "WINDOW", "QualityTracker", "roc_auc"]
