"""Known answers for the SGD-style learners: Pegasos and logistic regression against plain
dense implementations of the papers' updates (which check the scale trick, the O(1)
projection and the cumulative L1 penalty), plus their defining properties."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.learning.batch import Batch
from service.learning.registry import make_learner


def stream(n: int, dim: int, seed: int, noise: float = 0.5) -> tuple[Batch, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=dim)
    rows, ys = [], []
    X = np.zeros((n, dim))
    for i in range(n):
        idx = rng.choice(dim, size=int(rng.integers(1, 7)), replace=False)
        val = rng.normal(size=idx.shape[0]) * 2
        rows.append((idx.tolist(), val.tolist()))
        X[i, idx] = val
        ys.append(int(truth[idx] @ val + noise * rng.normal() > 0))
    return Batch.from_rows(rows, ys), X


def dense_pegasos(
    X: np.ndarray, y: np.ndarray, lam: float, projection: bool, bias: bool
) -> tuple[np.ndarray, float, list[bool]]:
    w, b, flags = np.zeros(X.shape[1]), 0.0, []
    for t, (x, label) in enumerate(zip(X, y, strict=True), start=1):
        yy = 1.0 if label == 1 else -1.0
        s = x @ w + b
        flags.append((s > 0) != (yy > 0))
        eta = 1.0 / (lam * t)
        w = (1 - 1 / t) * w
        if yy * s < 1:
            w = w + eta * yy * x
            if bias:
                b += eta * yy
        if projection:
            norm = np.linalg.norm(w)
            if norm > 1 / math.sqrt(lam):
                w = w * (1 / math.sqrt(lam)) / norm
    return w, b, flags


@pytest.mark.parametrize(
    ("lam", "projection", "bias"), [(0.01, False, False), (0.1, True, False), (0.05, True, True)]
)
def test_pegasos_matches_dense_reference(lam: float, projection: bool, bias: bool) -> None:
    batch, X = stream(1_500, 30, seed=0)
    model = make_learner("pegasos", 30, 2, {"lam": lam, "projection": projection, "bias": bias})
    flags = model.learn(batch)
    w, b, ref_flags = dense_pegasos(X, batch.y, lam, projection, bias)
    assert flags.tolist() == ref_flags
    np.testing.assert_allclose(model.serving().W, w, rtol=1e-8, atol=1e-10)
    assert model.serving().b == pytest.approx(b, rel=1e-9, abs=1e-12)
    if not bias:
        assert model.serving().b == 0.0  # the paper's objective: no bias


@pytest.mark.parametrize("lam", [1e-3, 0.2, 4.0])
def test_pegasos_projection_keeps_norm_in_the_ball(lam: float) -> None:
    batch, _ = stream(800, 40, seed=1)
    model = make_learner("pegasos", 40, 2, {"lam": lam, "projection": True})
    radius = 1 / math.sqrt(lam)
    norms = []
    for i in range(0, batch.n, 7):
        model.learn(batch.slice(i, min(i + 7, batch.n)))
        norms.append(float(np.linalg.norm(model.serving().W)))
    assert max(norms) <= radius * (1 + 1e-9)
    assert max(norms) > 0.5 * radius  # the ball was actually reached


def test_pegasos_renormalises_a_tiny_scale_without_changing_w() -> None:
    """Drive ``scale`` under the renormalisation threshold through the state; the next steps
    must equal those of a learner that never went through the tiny scale."""
    batch, _ = stream(200, 12, seed=2)
    model = make_learner("pegasos", 12, 2, {"lam": 0.1})
    model.learn(batch.slice(0, 100))
    state = model.get_state()
    w = state["v"] * state["scale"]
    tiny = 1e-10 * 1.01
    state["v"] = w / tiny
    state["scale"] = tiny
    state["vsq"] = float(state["v"] @ state["v"])
    model.set_state(state)
    model.learn(batch.slice(100, 200))
    assert model.get_state()["scale"] > 1e-3  # it renormalised
    ref = make_learner("pegasos", 12, 2, {"lam": 0.1})
    ref.learn(batch)
    np.testing.assert_allclose(model.serving().W, ref.serving().W, rtol=1e-7, atol=1e-12)


def dense_logistic(
    X: np.ndarray, y: np.ndarray, lr: float, l2: float, l1: float, invscaling: bool = False
) -> tuple[np.ndarray, float]:
    """SGD on the log loss; L1 by Tsuruoka et al.'s cumulative penalty on the touched weights."""
    w, b = np.zeros(X.shape[1]), 0.0
    q, u = np.zeros(X.shape[1]), 0.0
    for t, (x, label) in enumerate(zip(X, y, strict=True), start=1):
        eta = lr / math.sqrt(t) if invscaling else lr
        p = 1 / (1 + math.exp(-(x @ w + b)))
        g = p - (1.0 if label == 1 else 0.0)
        w = (1 - eta * l2) * w - eta * g * x
        b -= eta * g
        if l1 > 0:
            u += eta * l1
            for j in np.flatnonzero(x):
                z = w[j]
                if z > 0:
                    w[j] = max(0.0, z - (u + q[j]))
                elif z < 0:
                    w[j] = min(0.0, z + (u - q[j]))
                q[j] += w[j] - z
    return w, b


@pytest.mark.parametrize(
    ("params", "invscaling"),
    [
        ({"lr": 0.2}, False),
        ({"lr": 0.5, "schedule": "invscaling"}, True),
        ({"lr": 0.2, "l2": 0.01}, False),
        ({"lr": 0.2, "l1": 0.002}, False),
    ],
)
def test_logistic_matches_dense_reference(params: dict[str, object], invscaling: bool) -> None:
    batch, X = stream(1_000, 25, seed=3)
    model = make_learner("logistic", 25, 2, params)
    model.learn(batch)
    lr = float(params["lr"])  # type: ignore[arg-type]
    l2 = float(params.get("l2", 0.0))  # type: ignore[arg-type]
    l1 = float(params.get("l1", 0.0))  # type: ignore[arg-type]
    w, b = dense_logistic(X, batch.y, lr, l2, l1, invscaling)
    np.testing.assert_allclose(model.serving().W, w, rtol=1e-9, atol=1e-12)
    assert model.serving().b == pytest.approx(b, rel=1e-9, abs=1e-12)


def test_logistic_l1_gives_exact_zeros_on_irrelevant_features() -> None:
    """Features 0..4 carry the label, 5..39 are noise: L1 zeroes most noise weights exactly."""
    rng = np.random.default_rng(4)
    truth = np.array([2.0, -2.0, 1.5, -1.5, 1.0])
    rows, ys = [], []
    for _ in range(3_000):
        relevant = rng.choice(5, 2, replace=False)
        idx = np.concatenate([relevant, 5 + rng.choice(35, 4, replace=False)])
        val = rng.normal(size=6)
        rows.append((idx.tolist(), val.tolist()))
        ys.append(int(truth[relevant] @ val[:2] > 0))
    batch = Batch.from_rows(rows, ys)
    sparse = make_learner("logistic", 40, 2, {"lr": 0.1, "l1": 0.01})
    dense = make_learner("logistic", 40, 2, {"lr": 0.1})
    sparse.learn(batch)
    dense.learn(batch)
    w_sparse, w_dense = sparse.serving().W, dense.serving().W
    assert np.count_nonzero(w_dense[5:]) == 35
    assert np.count_nonzero(w_sparse[5:]) <= 10  # exact zeros, not merely small
    assert np.count_nonzero(w_sparse[:5]) == 5


def test_logistic_probability_is_calibrated_on_its_own_model() -> None:
    """On data drawn from a logistic model, the learned probabilities are calibrated: in each
    probability bin the positive rate is close to the mean predicted probability."""
    rng = np.random.default_rng(5)
    dim, n = 10, 40_000
    truth = rng.normal(size=dim)
    rows, ys = [], []
    for _ in range(n):
        idx = rng.choice(dim, size=4, replace=False)
        val = rng.normal(size=4)
        p = 1 / (1 + math.exp(-(truth[idx] @ val)))
        rows.append((idx.tolist(), val.tolist()))
        ys.append(int(rng.random() < p))
    batch = Batch.from_rows(rows, ys)
    model = make_learner("logistic", dim, 2, {"lr": 0.5, "schedule": "invscaling"})
    model.learn(batch.slice(0, 30_000))
    served = model.serving()
    assert served.link == "calibrated-sigmoid"
    test = batch.slice(30_000, n)
    proba = served.proba(test)
    for lo in (0.1, 0.3, 0.5, 0.7):
        sel = (proba >= lo) & (proba < lo + 0.2)
        assert sel.sum() > 300
        assert abs(float(test.y[sel].mean()) - float(proba[sel].mean())) < 0.05


def test_logistic_rejects_a_shrink_factor_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match=r"l2 must be < 1/lr"):
        make_learner("logistic", 4, 2, {"lr": 1.0, "l2": 1.0})
