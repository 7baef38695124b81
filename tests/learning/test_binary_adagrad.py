"""Known answers for ``adagrad`` (NAG, Ross, Mineiro & Langford 2013): a plain dense version
of the paper's Algorithm 1, and what it is for — unnormalised features (Spambase)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from service.datasets import read_text
from service.learning.features import Batch
from service.learning.registry import make_learner


def dense_nag(
    X: np.ndarray, y: np.ndarray, lr: float, loss: str, bias: bool
) -> tuple[np.ndarray, float, list[bool]]:
    dim = X.shape[1]
    w, G, s = np.zeros(dim), np.zeros(dim), np.zeros(dim)
    b, gb, N = 0.0, 0.0, 0.0
    flags = []
    for t, (x, label) in enumerate(zip(X, y, strict=True), start=1):
        yy = 1.0 if label == 1 else -1.0
        flags.append((x @ w + b > 0) != (yy > 0))
        for i in np.flatnonzero(x):
            if abs(x[i]) > s[i]:
                if s[i] > 0:
                    w[i] *= s[i] ** 2 / x[i] ** 2
                s[i] = abs(x[i])
        p = x @ w + b
        nz = np.flatnonzero(x)
        N += float(np.sum(x[nz] ** 2 / s[nz] ** 2)) + (1.0 if bias else 0.0)
        if loss == "logistic":
            d = -yy / (1 + math.exp(yy * p))
        elif loss == "hinge":
            d = -yy if yy * p < 1 else 0.0
        else:
            d = p - yy
        if d != 0.0 and N > 0:
            rate = lr * math.sqrt(t / N)
            for i in nz:
                g = d * x[i]
                G[i] += g * g
                w[i] -= rate * g / (s[i] * math.sqrt(G[i]))
            if bias:
                gb += d * d
                b -= rate * d / math.sqrt(gb)
    return w, b, flags


@pytest.mark.parametrize(
    ("loss", "bias"), [("logistic", True), ("hinge", True), ("squared", False), ("logistic", False)]
)
def test_adagrad_matches_dense_nag(loss: str, bias: bool) -> None:
    rng = np.random.default_rng(0)
    dim, n = 30, 1_200
    scales = 10.0 ** rng.uniform(-3, 3, size=dim)  # features on wildly different scales
    truth = rng.normal(size=dim) / scales
    rows, ys = [], []
    X = np.zeros((n, dim))
    for i in range(n):
        idx = rng.choice(dim, size=int(rng.integers(1, 8)), replace=False)
        val = rng.normal(size=idx.shape[0]) * scales[idx]
        X[i, idx] = val
        rows.append((idx.tolist(), val.tolist()))
        ys.append(int(truth[idx] @ val + 0.3 * rng.normal() > 0))
    batch = Batch.from_rows(rows, ys)
    model = make_learner("adagrad", dim, 2, {"lr": 0.5, "loss": loss, "bias": bias})
    flags = model.learn(batch)
    w, b, ref_flags = dense_nag(X, batch.y, 0.5, loss, bias)
    assert flags.tolist() == ref_flags
    np.testing.assert_allclose(model.serving().W, w, rtol=1e-9, atol=1e-12)
    assert model.serving().b == pytest.approx(b, rel=1e-9, abs=1e-12)
    assert model.serving().link == ("calibrated-sigmoid" if loss == "logistic" else "sigmoid")


def test_adagrad_copes_with_unnormalised_spambase(
    spambase_path: Path, spambase_order_path: Path
) -> None:
    """Spambase's raw features span 0.01 to 15,841: the perceptron thrashes (~46% progressive
    mistakes), the normalised adaptive learner does not."""
    recs = {}
    for line in read_text(spambase_path).splitlines():
        if line.strip():
            rec = json.loads(line)
            recs[rec["id"]] = rec
    names = sorted({k for rec in recs.values() for k in rec["features"]})
    index = {k: i for i, k in enumerate(names)}
    rows, ys = [], []
    for ident in spambase_order_path.read_text().split():
        feats = recs[ident]["features"]
        rows.append(([index[k] for k in feats], [float(v) for v in feats.values()]))
        ys.append(int(recs[ident]["label"] == "spam"))
    batch = Batch.from_rows(rows, ys)
    rates = {}
    for name in ("perceptron", "adagrad"):
        learner = make_learner(name, len(names), 2, {})
        rates[name] = float(learner.learn(batch).mean())
    assert rates["adagrad"] < 0.15 < 0.3 < rates["perceptron"]
