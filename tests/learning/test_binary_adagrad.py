"""Known answers for ``adagrad`` (Vowpal Wabbit's default learner: adaptive, normalised,
importance-invariant): a plain-Python transcription of VW's update, the closed-form flows
against a numerical integration of their ODE, Vowpal Wabbit itself when it is installed, and
what it is for — unnormalised features (Spambase)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from service.cli.datasets import read_text
from service.learning.adagrad import LOSSES, dloss, flow
from service.learning.batch import Batch
from service.learning.registry import make_learner

CONSTANT = 11650396  # Vowpal Wabbit's hash of its constant (bias) feature


def reference(
    rows: list[tuple[list[int], list[float], int]],
    lr: float,
    loss: str,
    invariant: bool,
    bias: bool,
) -> tuple[dict[int, float], float, list[float]]:
    """VW's gd.cc update (adaptive, normalized, sqrt rate), one example at a time, with the
    loss derivative and flow written out afresh (not imported)."""
    w: dict[int, float] = {}
    G: dict[int, float] = {}
    s: dict[int, float] = {}
    total_t, total_n, margins = 0.0, 0.0, []

    def deriv(p: float, y: int) -> float:
        z = y * p
        if loss == "logistic":
            return -y / (1.0 + math.exp(z))
        if loss == "hinge":
            return -y if z < 1 else 0.0
        if loss == "squared":
            return p - y
        return 0.0 if z >= 1 else (-2.0 * y * (1 - z) if z >= -1 else -4.0 * y)

    def moved(p: float, y: int, a: float) -> float:
        z = y * p
        if loss == "logistic":  # bisection on z1 + e^z1 = z + e^z + a, z1 in [z, z + a]
            target, lo, hi = z + math.exp(z) + a, z, z + a
            for _ in range(200):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if mid + math.exp(mid) < target else (lo, mid)
            return y * 0.5 * (lo + hi)
        if loss == "hinge":
            return y * min(1.0, z + a)
        if loss == "squared":
            return y + (p - y) * math.exp(-a)
        if z < -1:
            t1 = (-1 - z) / (4 * a)
            return y * (z + 4 * a) if t1 >= 1 else y * (1 - 2 * math.exp(-2 * a * (1 - t1)))
        return y * (1 - (1 - z) * math.exp(-2 * a))

    for idx, val, label in rows:
        y = 1 if label == 1 else -1
        feats = list(zip(idx, val, strict=True)) + ([(-1, 1.0)] if bias else [])
        p = sum(w.get(j, 0.0) * x for j, x in feats)
        margins.append(p)
        d = deriv(p, y)
        if d == 0.0:
            continue
        norm_x, q, rates = 0.0, 0.0, {}
        for j, x in feats:
            G[j] = G.get(j, 0.0) + d * d * x * x
            if abs(x) > s.get(j, 0.0):
                if s.get(j, 0.0) > 0:
                    w[j] = w.get(j, 0.0) * s[j] / abs(x)
                s[j] = abs(x)
            rates[j] = 1.0 / (s[j] * math.sqrt(G[j]))
            norm_x += x * x / s[j] ** 2
            q += x * x * rates[j]
        total_t += 1
        total_n += norm_x
        mult = math.sqrt(total_t / total_n)
        q *= mult
        u = (moved(p, y, lr * q) - p) / q if invariant else -lr * d
        for j, x in feats:
            w[j] = w.get(j, 0.0) + mult * u * x * rates[j]
    return w, w.get(-1, 0.0), margins


def scaled_stream(n: int, dim: int, seed: int) -> list[tuple[list[int], list[float], int]]:
    """Features on wildly different scales that also grow over time (so rescaling happens)."""
    rng = np.random.default_rng(seed)
    scales = 10.0 ** rng.uniform(-2, 2, size=dim)
    truth = rng.normal(size=dim) / scales
    rows = []
    for _ in range(n):
        idx = np.sort(rng.choice(dim, size=int(rng.integers(1, 7)), replace=False))
        val = rng.normal(size=idx.size) * scales[idx] * rng.uniform(0.5, 2.0, size=idx.size)
        rows.append((idx.tolist(), val.tolist(), int(truth[idx] @ val + 0.3 * rng.normal() > 0)))
    return rows


def to_batch(rows: list[tuple[list[int], list[float], int]]) -> Batch:
    return Batch.from_rows([(i, v) for i, v, _ in rows], [y for _, _, y in rows])


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize(("invariant", "bias"), [(True, True), (False, True), (True, False)])
def test_adagrad_matches_the_reference_update(loss: str, invariant: bool, bias: bool) -> None:
    dim = 25
    rows = scaled_stream(800, dim, seed=0)
    model = make_learner("adagrad", dim, 2, {"lr": 0.5, "loss": loss, "invariant": invariant,
                                             "bias": bias})  # fmt: skip
    flags, margins = model.learn_scored(to_batch(rows))
    w, b, ref_margins = reference(rows, 0.5, loss, invariant, bias)
    np.testing.assert_allclose(margins, ref_margins, rtol=1e-9, atol=1e-12)
    ys = np.array([y for _, _, y in rows])
    assert flags.tolist() == ((np.array(ref_margins) > 0) != (ys == 1)).tolist()
    expected = np.array([w.get(j, 0.0) for j in range(dim)])
    np.testing.assert_allclose(model.serving().W, expected, rtol=1e-9, atol=1e-12)
    assert model.serving().b == pytest.approx(b, rel=1e-9, abs=1e-12)
    assert model.serving().link == ("calibrated-sigmoid" if loss == "logistic" else "sigmoid")


@pytest.mark.parametrize("loss", LOSSES)
def test_flow_is_the_gradient_flow_of_the_loss(loss: str) -> None:
    """The closed forms against a fine RK4 integration of dp/dt = −a·ℓ'(p) over t ∈ [0, 1]."""
    code = LOSSES.index(loss)
    for y in (-1.0, 1.0):
        for z in (-7.0, -1.5, -1.0, -0.3, 0.0, 0.4, 0.99, 2.5):
            for a in (1e-8, 1e-3, 0.2, 1.0, 3.0, 12.0):
                p, h = y * z, 1.0 / 4000
                for _ in range(4000):
                    k1 = -a * dloss(code, y, p)
                    k2 = -a * dloss(code, y, p + h * k1 / 2)
                    k3 = -a * dloss(code, y, p + h * k2 / 2)
                    k4 = -a * dloss(code, y, p + h * k3)
                    p += h * (k1 + 2 * k2 + 2 * k3 + k4) / 6
                # the hinge's ℓ' jumps at y·p = 1: the fixed-step integration may overstep by a·h
                tol = 2 * a * h if loss == "hinge" else 1e-6
                assert flow(code, y, y * z, a) == pytest.approx(p, rel=1e-6, abs=tol), (y, z, a)


def test_logistic_flow_for_large_steps_against_bisection() -> None:
    """Steps far beyond what an ODE integration covers (a up to 1e4), margins far out."""
    for y in (-1.0, 1.0):
        for z in (-40.0, -5.0, -1.0, 0.0, 0.5, 3.0, 40.0):
            for a in (1e-5, 0.3, 7.0, 100.0, 1e4):
                e0 = math.exp(z)
                lo, hi = 0.0, a  # the step t solves t + e^z·(e^t − 1) = a, in [0, a]
                for _ in range(400):
                    mid = 0.5 * (lo + hi)
                    value = mid + e0 * math.expm1(mid) - a if mid < 700 else math.inf
                    lo, hi = (mid, hi) if value < 0 else (lo, mid)
                expected = y * (z + 0.5 * (lo + hi))
                got = flow(LOSSES.index("logistic"), y, y * z, a)
                assert got == pytest.approx(expected, rel=1e-13, abs=1e-13), (y, z, a)


def test_invariant_steps_never_overshoot() -> None:
    """Whatever lr, an invariant step moves the margin towards the label and no further than
    the loss's flat part (hinge, modified Huber: y·p ≤ 1)."""
    one = Batch.from_rows([([0, 1], [1.0, -2.0])], [0])
    for loss in ("hinge", "modified_huber"):
        for lr in (0.1, 10.0, 1e6):
            m = make_learner("adagrad", 2, 2, {"lr": lr, "loss": loss})
            m.learn(one)
            assert 0.0 < -float(m.decision(one)[0]) <= 1.0 + 1e-12


def test_adagrad_matches_vowpal_wabbit() -> None:
    """The same stream through ``vw`` (float32, approximate inverse square root): margins and
    weights agree to ~1e-4. Feature names are integers, which VW uses as their own hash."""
    vw_module = pytest.importorskip("vowpalwabbit", reason="vowpalwabbit is not installed")
    dim, bits = 20, 10
    rows = scaled_stream(500, dim, seed=3)
    for loss in ("logistic", "hinge"):
        for invariant in (True, False):
            flags = f"--quiet -b {bits} --loss_function {loss}" + (
                "" if invariant else " --adaptive --normalized"  # naming them drops --invariant
            )
            vw = vw_module.Workspace(flags)
            vw_margins = []
            for idx, val, y in rows:
                feats = " ".join(f"{j}:{v:.17g}" for j, v in zip(idx, val, strict=True))
                ex = vw.parse(f"{1 if y == 1 else -1} | {feats}")
                vw.learn(ex)
                vw_margins.append(ex.get_simplelabel_prediction())
                vw.finish_example(ex)
            vw_w = np.array([vw.get_weight(j) for j in range(dim)])
            vw_b = vw.get_weight(CONSTANT & ((1 << bits) - 1))
            vw.finish()
            model = make_learner("adagrad", dim, 2, {"loss": loss, "invariant": invariant})
            _, margins = model.learn_scored(to_batch(rows))
            # vw reports its predictions clipped: to [−1, 1] (hinge), [−50, 50] (logistic)
            margins = np.clip(margins, *((-1.0, 1.0) if loss == "hinge" else (-50.0, 50.0)))
            scale = np.abs(vw_w).max()
            np.testing.assert_allclose(margins, vw_margins, rtol=0, atol=1e-3 * scale)
            np.testing.assert_allclose(model.serving().W, vw_w, rtol=0, atol=1e-3 * scale)
            assert model.serving().b == pytest.approx(vw_b, abs=1e-3 * scale)


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
    for name, params in (
        ("perceptron", {}),
        ("adagrad", {}),
        ("adagrad-plain", {"invariant": False}),
    ):
        learner = make_learner(name.split("-")[0], len(names), 2, params)
        rates[name] = float(learner.learn(batch).mean())
    assert max(rates["adagrad"], rates["adagrad-plain"]) < 0.15 < 0.3 < rates["perceptron"]


# What version 0.1's adagrad (float slots b, Gb, N; no T) committed after learning
# [([0, 1], [3.0, 0.5]), ([1, 2], [1.0, 2.0]), ([0, 3], [0.25, 1.0]), ([2], [4.0])] with
# labels [1, 0, 1, 0] at dim 4 (printed by that version's get_state()).
OLD_STATE: dict[str, object] = {
    "examples_seen": 4,
    "mistakes": 2,
    "updates": 4,
    "max_norm": 4.0,
    "b": 0.06921253702764099,
    "Gb": 1.1164940562993508,
    "N": 10.006944444444445,
    "wgs": np.array(
        [
            [0.10431872915774798, 2.2642516541622055, 3.0],
            [-0.12255891052810503, 0.4304548782573464, 1.0],
            [-0.10435413049168443, 5.800022896176786, 4.0],
            [0.30605341098073086, 0.2280264665952918, 1.0],
        ]
    ),
}


def test_a_state_from_before_the_T_slot_still_loads() -> None:
    """A 0.1 deployment upgrading: its committed adagrad states lack ``T``; they load with
    T = examples_seen (0.1's normaliser was √(seen/N)), weights and statistics intact, and
    learning carries on from them as from a state that had T all along."""
    m = make_learner("adagrad", 4, 2, {})
    m.set_state(OLD_STATE)
    state = m.get_state()
    assert state["T"] == 4.0
    assert np.array_equal(state["wgs"], OLD_STATE["wgs"])
    assert (state["b"], state["N"], state["examples_seen"]) == (OLD_STATE["b"], OLD_STATE["N"], 4)
    one = Batch.from_rows([([0, 2], [1.0, 1.0])], [1])
    explicit = make_learner("adagrad", 4, 2, {})
    explicit.set_state({**OLD_STATE, "T": 4.0})
    m.learn(one)
    explicit.learn(one)
    assert np.array_equal(m.get_state()["wgs"], explicit.get_state()["wgs"])
    assert m.get_state()["T"] == 5.0
    # a state that is not an adagrad state at all is still refused, and changes nothing
    with pytest.raises(ValueError, match="missing"):
        m.set_state({k: v for k, v in OLD_STATE.items() if k != "N"})
    assert m.get_state()["T"] == 5.0
