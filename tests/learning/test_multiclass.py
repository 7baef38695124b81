"""Known answers for the multi-class learners: agreement with the binary forms on two
classes, naive dense reference implementations, PA steps, Pegasos' ball, softmax stability,
and batch == one row at a time."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.learning.averaged_perceptron import AveragedPerceptron
from service.learning.batch import Batch
from service.learning.multiclass_averaged_perceptron import MulticlassAveragedPerceptron
from service.learning.multiclass_pa import MulticlassPA, MulticlassPA1, MulticlassPA2
from service.learning.multiclass_pegasos import MulticlassPegasos
from service.learning.multiclass_perceptron import MulticlassPerceptron
from service.learning.multiclass_softmax import MulticlassSoftmax, softmax_into
from service.learning.perceptron import Perceptron
from service.learning.registry import REGISTRY, make_learner

DIM = 60


def sparse_stream(n: int, k: int, seed: int, dim: int = DIM, nnz: int = 8) -> Batch:
    """A noisy linearly-generated K-class stream with integer-ish values (exact sums)."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=(k, dim))
    rows, ys = [], []
    for _ in range(n):
        idx = rng.choice(dim, size=nnz, replace=False)
        val = rng.integers(-3, 4, size=nnz).astype(float)
        val[val == 0] = 1.0
        x = np.zeros(dim)
        x[idx] = val
        y = int(np.argmax(truth @ x)) if rng.random() > 0.1 else int(rng.integers(k))
        rows.append((idx.tolist(), val.tolist()))
        ys.append(y)
    return Batch.from_rows(rows, ys)


def dense_rows(batch: Batch, dim: int = DIM) -> np.ndarray:
    X = np.zeros((batch.n, dim))
    for i in range(batch.n):
        lo, hi = batch.indptr[i], batch.indptr[i + 1]
        X[i, batch.indices[lo:hi]] = batch.data[lo:hi]
    return X


# --- two classes: the multi-class forms agree with the binary ones --------------------------


def test_multiclass_perceptron_on_two_classes_makes_the_binary_mistakes() -> None:
    batch = sparse_stream(3000, 2, seed=1)
    binary, multi = Perceptron(DIM), MulticlassPerceptron(DIM, n_classes=2)
    mb, mm = binary.learn(batch), multi.learn(batch)
    assert mb.sum() > 50  # a stream with real mistakes in it
    np.testing.assert_array_equal(mb, mm)
    assert binary.updates == multi.updates
    W, b = multi.serving().W, multi.serving().b
    np.testing.assert_allclose((W[1] - W[0]) / 2, binary.w)
    assert (b[1] - b[0]) / 2 == binary.b


def test_multiclass_averaged_perceptron_on_two_classes_makes_the_binary_mistakes() -> None:
    batch = sparse_stream(3000, 2, seed=2)
    binary, multi = AveragedPerceptron(DIM), MulticlassAveragedPerceptron(DIM, n_classes=2)
    np.testing.assert_array_equal(binary.learn(batch), multi.learn(batch))
    W = multi.serving().W
    np.testing.assert_allclose((W[1] - W[0]) / 2, binary.serving().W, atol=1e-12)


# --- naive dense references -----------------------------------------------------------------


def naive_perceptron_family(batch: Batch, k: int, mode: str, C: float = 1.0):
    """Dense, one example at a time: perceptron / pa / pa1 / pa2, and the running average."""
    X = dense_rows(batch)
    W, b = np.zeros((k, DIM)), np.zeros(k)
    W_sum, b_sum = np.zeros((k, DIM)), np.zeros(k)
    mistakes = []
    for x, y in zip(X, batch.y, strict=True):
        s = W @ x + b
        mistakes.append(int(np.argmax(s)) != y)
        wrong = [r for r in range(k) if r != y]
        r = wrong[int(np.argmax(s[wrong]))]
        sq = float(x @ x)
        step = 0.0
        if mode == "perceptron":
            step = 1.0 if s[y] <= s[r] else 0.0
        else:
            loss = max(0.0, 1.0 - (s[y] - s[r]))
            if loss > 0:
                if mode == "pa2":
                    step = loss / (2 * sq + 0.5 / C)
                elif sq > 0:
                    step = loss / (2 * sq) if mode == "pa" else min(C, loss / (2 * sq))
        W[y] += step * x
        W[r] -= step * x
        b[y] += step
        b[r] -= step
        W_sum += W
        b_sum += b
    return np.array(mistakes), W, b, W_sum / len(X), b_sum / len(X)


@pytest.mark.parametrize(
    ("cls", "mode"),
    [
        (MulticlassPerceptron, "perceptron"),
        (MulticlassPA, "pa"),
        (MulticlassPA1, "pa1"),
        (MulticlassPA2, "pa2"),
    ],
)
def test_perceptron_and_pa_match_a_naive_implementation(cls: type, mode: str) -> None:
    batch = sparse_stream(800, 4, seed=3)
    kwargs = {"C": 0.05} if mode in ("pa1", "pa2") else {}
    learner = cls(DIM, n_classes=4, **kwargs)
    got = learner.learn(batch)
    mistakes, W, b, _, _ = naive_perceptron_family(batch, 4, mode, C=kwargs.get("C", 1.0))
    np.testing.assert_array_equal(got, mistakes)
    np.testing.assert_allclose(learner.serving().W, W, atol=1e-9)
    np.testing.assert_allclose(learner.serving().b, b, atol=1e-9)


def test_averaged_perceptron_serves_the_naive_average() -> None:
    batch = sparse_stream(600, 3, seed=4)
    learner = MulticlassAveragedPerceptron(DIM, n_classes=3)
    learner.learn(batch)
    _, _, _, W_avg, b_avg = naive_perceptron_family(batch, 3, "perceptron")
    np.testing.assert_allclose(learner.serving().W, W_avg, atol=1e-9)
    np.testing.assert_allclose(learner.serving().b, b_avg, atol=1e-9)
    np.testing.assert_allclose(
        learner.decision(batch), dense_rows(batch) @ W_avg.T + b_avg, atol=1e-9
    )


def test_pa1_step_puts_the_true_class_one_above_the_top_wrong_one() -> None:
    m = MulticlassPA1(4, n_classes=3, C=100.0)
    x = Batch.from_rows([([0, 2], [1.0, 2.0])], [1])
    m.learn(x)  # from zero: loss 1, τ = 1/(2·5) = 0.1
    np.testing.assert_allclose(m.serving().W[1], [0.1, 0, 0.2, 0])
    np.testing.assert_allclose(m.serving().W[0], [-0.1, 0, -0.2, 0])
    s = m.decision(x)[0]
    # the bias moved too (left out of ‖x‖²), so the margin is 1 + 2τ
    assert math.isclose(s[1] - s[0], 1.0 + 0.2)
    capped = MulticlassPA1(4, n_classes=3, C=0.01)
    capped.learn(x)
    np.testing.assert_allclose(capped.serving().W[1], [0.01, 0, 0.02, 0])


def naive_pegasos(batch: Batch, k: int, lam: float, projection: bool) -> tuple:
    X = dense_rows(batch)
    W = np.zeros((k, DIM))
    norms = []
    for t, (x, y) in enumerate(zip(X, batch.y, strict=True), start=1):
        s = W @ x
        wrong = [r for r in range(k) if r != y]
        r = wrong[int(np.argmax(s[wrong]))]
        eta = 1.0 / (lam * t)
        W *= 1.0 - 1.0 / t
        if s[y] - s[r] < 1.0:
            W[y] += eta * x
            W[r] -= eta * x
        if projection:
            norm = np.linalg.norm(W)
            if norm > 1 / math.sqrt(lam):
                W *= (1 / math.sqrt(lam)) / norm
        norms.append(np.linalg.norm(W))
    return W, np.array(norms)


@pytest.mark.parametrize("projection", [False, True])
def test_pegasos_matches_a_naive_implementation_and_stays_in_the_ball(projection: bool) -> None:
    batch = sparse_stream(500, 3, seed=5)
    lam = 0.01
    W_ref, norms = naive_pegasos(batch, 3, lam, projection)
    m = MulticlassPegasos(DIM, n_classes=3, lam=lam, projection=projection)
    for i in range(batch.n):
        m.learn(batch.row(i))
        if projection:
            assert np.linalg.norm(m.serving().W) <= 1 / math.sqrt(lam) * (1 + 1e-12)
    np.testing.assert_allclose(m.serving().W, W_ref, rtol=1e-9, atol=1e-12)
    if projection:
        assert norms.max() <= 1 / math.sqrt(lam) * (1 + 1e-12)


def naive_softmax(batch: Batch, k: int, lr: float, l2: float, T: float, eps: float) -> tuple:
    X = dense_rows(batch)
    W, b = np.zeros((k, DIM)), np.zeros(k)
    for x, y in zip(X, batch.y, strict=True):
        z = (W @ x + b) / T
        p = np.exp(z - z.max())
        p /= p.sum()
        q = np.full(k, eps / k)
        q[y] += 1 - eps
        g = (p - q) / T
        W *= 1 - lr * l2
        W -= lr * np.outer(g, x)
        b -= lr * g
    return W, b


def test_softmax_matches_a_naive_implementation() -> None:
    batch = sparse_stream(500, 4, seed=6)
    params = {"lr": 0.05, "l2": 0.01, "temperature": 2.0, "label_smoothing": 0.1}
    m = MulticlassSoftmax(DIM, n_classes=4, **params)
    m.learn(batch)
    W, b = naive_softmax(batch, 4, 0.05, 0.01, 2.0, 0.1)
    served = m.serving()  # serves W/T, b/T
    np.testing.assert_allclose(served.W * 2.0, W, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(served.b * 2.0, b, rtol=1e-9, atol=1e-12)


def test_softmax_probabilities_sum_to_one_and_survive_huge_logits() -> None:
    m = MulticlassSoftmax(3, n_classes=3)
    state = m.get_state()
    state["W"] = np.array([[1e308, 0, 0], [1e307, 0, 0], [0, 1e308, -1e308]])
    m.set_state(state)
    x = Batch.from_rows([([0], [1.0]), ([0, 2], [0.5, 1.0]), ([1], [1.0]), ([], [])], [0, 1, 2, 0])
    p = m.serving().proba(x)
    assert np.all(np.isfinite(p))
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert p[0].argmax() == 0 and p[2].argmax() == 2
    np.testing.assert_allclose(p[3], 1 / 3)
    flags = m.learn(x)  # learning from huge logits keeps every weight finite
    assert flags.tolist()[:3] == [False, True, False]
    assert np.all(np.isfinite(m.get_state()["W"]))
    assert np.all(np.isfinite(m.serving().proba(x)))


@pytest.mark.parametrize(
    "z",
    [[1e308, -1e308, 0.0], [np.inf, 0.0, 5.0], [-np.inf, -np.inf, 2.0], [0.0, 0.0, 0.0]],
)
def test_the_compiled_softmax_is_a_distribution_for_any_logits(z: list[float]) -> None:
    p = np.empty(3)
    with np.errstate(over="ignore"):
        softmax_into(np.array(z), p)
    assert np.all(np.isfinite(p)) and math.isclose(p.sum(), 1.0)
    assert p.argmax() == int(np.argmax(z))


# --- the batch path equals one row at a time, for every multi-class algorithm ---------------


@pytest.mark.parametrize("name", sorted(n for (n, multi) in REGISTRY if multi))
def test_batch_equals_one_row_at_a_time(name: str) -> None:
    batch = sparse_stream(400, 5, seed=7)
    whole, single = make_learner(name, DIM, 5), make_learner(name, DIM, 5)
    flags = whole.learn(batch)
    singles = np.concatenate([single.learn(batch.row(i)) for i in range(batch.n)])
    np.testing.assert_array_equal(flags, singles)
    for key, value in whole.get_state().items():
        np.testing.assert_array_equal(value, single.get_state()[key], err_msg=key)


@pytest.mark.parametrize("name", sorted(n for (n, multi) in REGISTRY if multi))
def test_learns_a_separable_problem(name: str) -> None:
    rng = np.random.default_rng(8)
    k = 4
    centers = rng.normal(size=(k, DIM)) * 3
    rows, ys = [], []
    for _ in range(3000):
        y = int(rng.integers(k))
        x = centers[y] + rng.normal(size=DIM) * 0.3
        rows.append((list(range(DIM)), x.tolist()))
        ys.append(y)
    batch = Batch.from_rows(rows, ys)
    m = make_learner(name, DIM, k)
    flags = m.learn(batch)
    assert flags[:200].sum() > flags[-1000:].sum()
    assert flags[-1000:].mean() < 0.05, f"{name}: {flags[-1000:].mean():.3f}"


@pytest.mark.parametrize(
    ("name", "params", "needle"),
    [
        ("pa1", {"C": 0}, "C must be > 0"),
        ("pegasos", {"lam": -1}, "lam must be > 0"),
        ("pegasos", {"projection": 1}, "projection"),
        ("softmax", {"lr": 0}, "lr must be > 0"),
        ("softmax", {"l2": 20, "lr": 0.1}, "l2 must be <"),
        ("softmax", {"temperature": 0}, "temperature must be > 0"),
        ("softmax", {"label_smoothing": 1.0}, "label_smoothing must be < 1"),
    ],
)
def test_hyper_parameters_are_validated_by_name(name: str, params: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        make_learner(name, DIM, 3, params)
