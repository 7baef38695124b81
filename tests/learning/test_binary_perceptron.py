"""Known answers for the perceptron family: Novikoff's bound, the averaged perceptron against
a brute-force average, the pocket against a plain-Python pocket, MIRA against PA-I."""

from __future__ import annotations

import numpy as np
import pytest

from service.learning.batch import Batch
from service.learning.registry import make_learner


def separable_stream(n: int, dim: int, delta: float, seed: int) -> tuple[Batch, np.ndarray]:
    """Rows with |u·x| ≥ δ for a unit vector u (through the origin), labelled by sign(u·x)."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=dim)
    u /= np.linalg.norm(u)
    rows, ys = [], []
    while len(rows) < n:
        idx = rng.choice(dim, size=8, replace=False)
        val = rng.normal(size=8)
        m = float(u[idx] @ val)
        if abs(m) >= delta:
            rows.append((idx.tolist(), val.tolist()))
            ys.append(int(m > 0))
    return Batch.from_rows(rows, ys), u


def test_perceptron_mistakes_within_novikoff_bound() -> None:
    """With the bias as a constant feature 1, the augmented data has margin δ w.r.t. the unit
    vector (u, 0) and radius √(R² + 1): at most (R² + 1)/δ² updates, however many passes."""
    delta = 0.3
    batch, _ = separable_stream(2_000, 50, delta, seed=0)
    p = make_learner("perceptron", 50, 2, {})
    per_pass = [int(p.learn(batch).sum()) for _ in range(30)]
    bound = (p.max_norm**2 + 1) / delta**2
    assert 0 < p.mistakes <= p.updates <= bound
    assert per_pass[-1] == 0  # converged: a separating hyperplane was found
    assert p.updates < sum(per_pass) + bound  # and it did not keep updating


def test_perceptron_updates_on_zero_margin_without_a_mistake() -> None:
    """y·s ≤ 0 updates; a tie (s = 0) predicts the negative class: an update, not a mistake."""
    p = make_learner("perceptron", 4, 2, {})
    assert p.learn(Batch.from_rows([([1], [1.0])], [0])).tolist() == [False]
    assert (p.updates, p.mistakes) == (1, 0)
    assert p.serving().W.tolist() == [0.0, -1.0, 0.0, 0.0] and p.serving().b == -1.0


def noisy_stream(n: int, dim: int, seed: int) -> Batch:
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=dim)
    rows, ys = [], []
    for _ in range(n):
        idx = rng.choice(dim, size=int(rng.integers(1, 6)), replace=False)
        val = rng.normal(size=idx.shape[0])
        rows.append((idx.tolist(), val.tolist()))
        ys.append(int(truth[idx] @ val + 0.8 * rng.normal() > 0))
    return Batch.from_rows(rows, ys)


def test_averaged_perceptron_equals_brute_force_average() -> None:
    dim = 20
    batch = noisy_stream(600, dim, seed=1)
    avg = make_learner("averaged_perceptron", dim, 2, {})
    flags = avg.learn(batch)
    # brute force: the plain perceptron's weights after every example, averaged densely
    plain = make_learner("perceptron", dim, 2, {})
    history_w, history_b, expected_flags = [], [], []
    X = np.zeros((batch.n, dim))
    for i in range(batch.n):
        r = batch.row(i)
        X[i, r.indices] = r.data
    for i in range(batch.n):
        if history_w:
            served_w, served_b = np.mean(history_w, axis=0), float(np.mean(history_b))
        else:
            served_w, served_b = np.zeros(dim), 0.0
        expected_flags.append((X[i] @ served_w + served_b > 0) != (batch.y[i] == 1))
        plain.learn(batch.row(i))
        history_w.append(plain.serving().W)
        history_b.append(plain.serving().b)
    assert np.array_equal(flags, expected_flags)
    assert avg.mistakes == sum(expected_flags) > 0
    served = avg.serving()
    np.testing.assert_allclose(served.W, np.mean(history_w, axis=0), rtol=1e-9, atol=1e-12)
    assert served.b == pytest.approx(np.mean(history_b), rel=1e-9, abs=1e-12)
    assert avg.updates == plain.updates  # it learns exactly as the perceptron does


def test_averaged_perceptron_generalises_better_under_label_noise() -> None:
    """Why averaging is served: with 10% flipped labels the last perceptron thrashes, the
    average does not (held-out error on clean labels, fixed seed)."""
    batch, _ = separable_stream(6_000, 20, 0.1, seed=0)
    rng = np.random.default_rng(0)
    noisy = batch.y.copy()
    flip = rng.random(batch.n) < 0.1
    noisy[flip] = 1 - noisy[flip]
    train = Batch(batch.indptr, batch.indices, batch.data, noisy).slice(0, 4_000)
    test = batch.slice(4_000, 6_000)
    errors = {}
    for name in ("perceptron", "averaged_perceptron"):
        model = make_learner(name, 20, 2, {})
        model.learn(train)
        errors[name] = float(np.mean(model.serving().predict(test) != test.y))
    assert errors["averaged_perceptron"] < 0.05 < errors["perceptron"]


def reference_pocket(batch: Batch, dim: int) -> tuple[list[bool], np.ndarray, float]:
    """The pocket with the online ratchet, written plainly (dense, copying eagerly)."""
    w, b = np.zeros(dim), 0.0
    wp, bp = np.zeros(dim), 0.0
    run = pocket_run = pocket_errors = 0
    flags = []
    for i in range(batch.n):
        r = batch.row(i)
        x = np.zeros(dim)
        x[r.indices] = r.data
        y = 1.0 if r.y[0] == 1 else -1.0
        flags.append((x @ wp + bp > 0) != (y > 0))
        pocket_wrong = flags[-1]
        if y * (x @ w + b) <= 0:
            w, b = w + y * x, b + y
            run = pocket_errors = 0
            continue
        pocket_errors += pocket_wrong
        run += 1
        same = np.array_equal(wp, w) and bp == b
        if same:
            pocket_run = max(pocket_run, run)
        elif run > pocket_run and pocket_errors > 0:
            wp, bp, pocket_run = w.copy(), b, run
    return flags, wp, bp


def test_pocket_serves_the_best_run_weights() -> None:
    dim = 10
    batch = noisy_stream(800, dim, seed=2)
    pocket = make_learner("pocket", dim, 2, {})
    flags = pocket.learn(batch)
    ref_flags, ref_w, ref_b = reference_pocket(batch, dim)
    assert flags.tolist() == ref_flags
    np.testing.assert_array_equal(pocket.serving().W, ref_w)
    assert pocket.serving().b == ref_b
    state = pocket.get_state()
    assert state["pocket_run"] >= 3  # it did pocket something better than the start
    assert pocket.updates > state["pocket_run"]  # and w moved on since


def test_mira_with_margin_one_is_pa1_and_conservative_without() -> None:
    batch = noisy_stream(500, 15, seed=3)
    mira, pa1 = (
        make_learner("mira", 15, 2, {"C": 0.3, "margin": 1.0}),
        make_learner("pa1", 15, 2, {"C": 0.3}),
    )
    assert np.array_equal(mira.learn(batch), pa1.learn(batch))
    np.testing.assert_array_equal(mira.serving().W, pa1.serving().W)
    conservative = make_learner("mira", 15, 2, {"C": 0.3})
    before = conservative.serving()
    for i in range(batch.n):
        row = batch.row(i)
        margin = float(conservative.decision(row)[0]) * (1 if row.y[0] == 1 else -1)
        conservative.learn(row)
        after = conservative.serving()
        changed = not np.array_equal(before.W, after.W) or before.b != after.b
        assert changed == (margin <= 0 and row.nnz > 0), i  # only on mistakes (and ties)
        before = after
    assert conservative.updates < pa1.updates
