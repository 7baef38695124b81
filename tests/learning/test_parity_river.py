"""Known answers from a reference implementation: our perceptron and PA family against River.

The same stream goes through River's ``learn_one`` (predict first, as progressive validation
does) and through our compiled batch kernel; the mistakes must agree example for example and
the weights and bias to 1e-9 (relative to their size: Spambase has features in the thousands).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from river import linear_model

from service.cli.datasets import read_text
from service.learning.batch import Batch
from service.learning.registry import make_learner

Stream = tuple[list[dict[int, float]], list[bool]]


def spambase_stream(path: Path, order_path: Path) -> tuple[Stream, int]:
    """Spambase in its shuffled order, names mapped to sorted indices, spam = positive."""
    by_id: dict[str, dict[str, Any]] = {}
    for line in read_text(path).splitlines():
        if line.strip():
            rec = json.loads(line)
            by_id[rec["id"]] = rec
    names = sorted({name for rec in by_id.values() for name in rec["features"]})
    index = {name: i for i, name in enumerate(names)}
    xs, ys = [], []
    for ident in order_path.read_text().split():
        rec = by_id[ident]
        xs.append({index[k]: float(v) for k, v in rec["features"].items()})
        ys.append(rec["label"] == "spam")
    return (xs, ys), len(names)


def synthetic_stream(n: int, dim: int, nnz: int, seed: int) -> Stream:
    """Sparse rows with a noisy linear label: both classes, mistakes all along."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=dim)
    xs, ys = [], []
    for _ in range(n):
        idx = rng.choice(dim, size=rng.integers(1, nnz + 1), replace=False)
        val = rng.normal(size=idx.shape[0])
        xs.append({int(i): float(v) for i, v in zip(idx, val, strict=True)})
        ys.append(bool(truth[idx] @ val + 0.5 * rng.normal() > 0))
    return xs, ys


def to_batch(stream: Stream) -> Batch:
    xs, ys = stream
    rows = [(list(x.keys()), list(x.values())) for x in xs]
    return Batch.from_rows(rows, [int(y) for y in ys])


def river_margin(model: Any, x: dict[int, float]) -> float:
    weights = model.weights if isinstance(model, linear_model.PAClassifier) else model._weights
    return sum(weights.get(k, 0.0) * v for k, v in x.items()) + float(model.intercept)


def run_river(model: Any, stream: Stream, dim: int) -> tuple[np.ndarray, np.ndarray, float]:
    """River's progressive mistakes, weights and bias.

    River predicts through ``sigmoid(s) > 0.5``, which rounds |s| < ~1e-16 to a tie (then
    False); our rule is ``s > 0``. So the prediction is River's own margin ``> 0``,
    and ``predict_one`` is checked to agree with it everywhere but at such ties.
    """
    mistakes = []
    for x, y in zip(*stream, strict=True):
        s = river_margin(model, x)
        if abs(s) > 1e-12:
            assert model.predict_one(x) == (s > 0)
        mistakes.append((s > 0) != y)
        model.learn_one(x, y)
    weights = model.weights if isinstance(model, linear_model.PAClassifier) else model._weights
    w = np.zeros(dim)
    for i, v in dict(weights).items():
        w[i] = v
    return np.array(mistakes), w, float(model.intercept)


CASES = [
    ("perceptron", {}, lambda: linear_model.Perceptron()),
    ("pa", {}, lambda: linear_model.PAClassifier(mode=0)),
    ("pa1", {"C": 0.01}, lambda: linear_model.PAClassifier(C=0.01, mode=1)),
    ("pa2", {"C": 0.05}, lambda: linear_model.PAClassifier(C=0.05, mode=2)),
]


def check_parity(
    name: str, params: dict[str, Any], river_model: Any, stream: Stream, dim: int
) -> None:
    r_mistakes, r_w, r_b = run_river(river_model, stream, dim)
    ours = make_learner(name, dim, 2, params)
    o_mistakes = ours.learn(to_batch(stream))
    first = np.flatnonzero(o_mistakes != r_mistakes)
    assert first.size == 0, f"mistakes differ first at example {first[0] if first.size else -1}"
    assert ours.mistakes == int(r_mistakes.sum())
    model = ours.serving()
    scale = max(1.0, float(np.abs(r_w).max()), abs(r_b))
    np.testing.assert_allclose(model.W, r_w, rtol=1e-9, atol=1e-9 * scale)
    assert model.b == pytest.approx(r_b, rel=1e-9, abs=1e-9 * scale)


@pytest.mark.parametrize(("name", "params", "river"), CASES, ids=[c[0] for c in CASES])
def test_parity_spambase(
    name: str, params: dict[str, Any], river: Any, spambase_path: Path, spambase_order_path: Path
) -> None:
    stream, dim = spambase_stream(spambase_path, spambase_order_path)
    assert len(stream[0]) > 4000 and dim == 57
    check_parity(name, params, river(), stream, dim)


@pytest.mark.parametrize(("name", "params", "river"), CASES, ids=[c[0] for c in CASES])
def test_parity_synthetic_sparse(name: str, params: dict[str, Any], river: Any) -> None:
    dim = 5_000
    stream = synthetic_stream(3_000, dim, nnz=30, seed=7)
    r_mistakes, _, _ = run_river(river(), stream, dim)
    assert 0 < r_mistakes.sum() < len(r_mistakes)  # a stream on which the test can fail
    check_parity(name, params, river(), stream, dim)
