"""The progressive quality tracker: the AUC bound holds, the rest is exact, batching is moot."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.learning.quality import EPS, QualityTracker, roc_auc


def reference_losses(s: np.ndarray, y: np.ndarray) -> np.ndarray:
    """−log p(true class) with p = σ(s) clipped to [EPS, 1 − EPS], straight from the formula
    (float128-free: via logaddexp, which is exact enough for the clipped range)."""
    z = np.where(y == 1, -s, s)
    loss = np.logaddexp(0.0, z)
    return np.clip(loss, -math.log1p(-EPS), -math.log(EPS))


def streams(seed: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    n = 3000
    y = (rng.random(n) < 0.3).astype(np.int32)
    overlap = rng.normal(0, 1, n) + 0.5 * y
    separated = rng.normal(0, 1, n) + 3.0 * (2 * y - 1)
    # integer margins (a perceptron on counts): many exact ties, some exactly 0
    ties = rng.integers(-3, 4, n).astype(np.float64) + y
    # heavy tails and magnitudes far outside the grid, both signs
    wild = rng.standard_cauchy(n) * 10.0 ** rng.integers(-8, 9, n) + y * 1e-3
    # a crowd of nearly equal scores: the worst case for a histogram
    crowd = 1.0 + 1e-9 * rng.normal(0, 1, n) + 1e-10 * y
    return [("overlap", overlap, y), ("separated", separated, y), ("ties", ties, y),
            ("wild", wild, y), ("crowd", crowd, y)]  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_overall_auc_is_within_its_stated_bound_of_the_exact_auc(seed: int) -> None:
    for name, s, y in streams(seed):
        t = QualityTracker()
        t.update(s, y)
        exact = roc_auc(s, y == 1)
        assert exact is not None and t.auc is not None and t.auc_error_bound is not None
        assert abs(t.auc - exact) <= t.auc_error_bound + 1e-12, name
        if name in ("separated", "overlap"):
            assert t.auc_error_bound < 1e-3, name  # a fine grid: the bound is small
        if name == "crowd":
            assert t.auc_error_bound > 0.1  # all in one bucket: the bound says so


def test_exact_ties_at_zero_cost_nothing_in_the_bound() -> None:
    t = QualityTracker()
    t.update(np.zeros(10), np.array([0, 1] * 5))
    assert t.auc == 0.5 and t.auc_error_bound == 0.0


def test_rolling_figures_are_exact_over_the_last_window_examples() -> None:
    _, s, y = streams(3)[0]
    t = QualityTracker(window=500)
    for start in range(0, s.size, 337):
        t.update(s[start : start + 337], y[start : start + 337])
    ws, wy = s[-500:], y[-500:]
    assert t.rolling_auc == roc_auc(ws, wy == 1)
    assert t.rolling_log_loss == pytest.approx(reference_losses(ws, wy).mean(), rel=1e-12)
    assert t.log_loss == pytest.approx(reference_losses(s, y).mean(), rel=1e-12)
    assert t.examples == s.size


def test_log_loss_clips_the_served_probability() -> None:
    t = QualityTracker()
    t.update(np.array([1e6, -1e6]), np.array([0, 1]))  # two confident mistakes
    assert t.log_loss == pytest.approx(-math.log(EPS))
    t2 = QualityTracker()
    t2.update(np.array([1e6]), np.array([1]))
    assert 0 < t2.log_loss < 1e-14  # p clipped below 1: never exactly 0


def test_undefined_figures_are_none() -> None:
    t = QualityTracker(window=2)
    assert t.summary()["auc"] is None and t.log_loss is None and t.rolling_log_loss is None
    assert t.rolling_auc is None
    t.update(np.array([0.3, 0.1]), np.array([1, 1]))  # one class only
    assert t.auc is None and t.auc_error_bound is None and t.rolling_auc is None
    assert t.log_loss is not None
    t.update(np.array([-0.2]), np.array([0]))
    assert t.auc == 1.0 and t.rolling_auc == 1.0  # window: [0.1 pos, -0.2 neg]


def test_state_does_not_depend_on_batching_and_round_trips_exactly() -> None:
    rng = np.random.default_rng(7)
    _, s, y = streams(4)[3]
    whole = QualityTracker(window=256)
    whole.update(s, y)
    cut = QualityTracker(window=256)
    resumed = QualityTracker(window=256)
    edges = np.sort(rng.choice(np.arange(1, s.size), 40, replace=False))
    for lo, hi in zip([0, *edges], [*edges, s.size], strict=True):
        cut.update(s[lo:hi], y[lo:hi])
        # a restart after every batch: state out, a fresh tracker in
        resumed.update(s[lo:hi], y[lo:hi])
        resumed = QualityTracker.from_state(resumed.get_state())
    a, b, c = whole.get_state(), cut.get_state(), resumed.get_state()
    for key in a:
        assert np.array_equal(a[key], b[key]) and np.array_equal(a[key], c[key]), key
    assert whole.summary() == cut.summary() == resumed.summary()
    assert a["buckets"].dtype == np.uint16 and a["counts"].dtype == np.uint32  # compact


def test_bad_input_and_bad_state_are_refused() -> None:
    t = QualityTracker()
    with pytest.raises(ValueError, match="links"):
        t.update(np.zeros(2), np.zeros(2), link="softmax")
    with pytest.raises(ValueError, match="alike"):
        t.update(np.zeros(2), np.zeros(3))
    with pytest.raises(ValueError, match="window"):
        QualityTracker(window=0)
    t.update(np.array([1.0, -1.0]), np.array([1, 0]))
    state = t.get_state()
    state["examples"] = 3
    before = t.summary()
    with pytest.raises(ValueError, match="add up"):
        t.set_state(state)
    with pytest.raises(ValueError, match="lacks"):
        QualityTracker.from_state({"window": 3})
    assert t.summary() == before
