"""The ``ensemble`` learner: members learn exactly as they would alone, the served margin is
their exponentially weighted mixture, the log loss regret bound of the docstring holds (and
is small) on a stream where one member is clearly best, state and params round-trip."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from service.errors import InvalidSpec
from service.learning.batch import Batch
from service.learning.ensemble import log_loss
from service.learning.registry import make_learner
from service.learning.spec import ModelSpec

DIM = 200
MEMBERS: list[dict[str, Any]] = [
    {"algorithm": "perceptron"},
    {"algorithm": "adagrad", "params": {"lr": 0.5}},
    {"algorithm": "pa"},
]


def stream(n: int, seed: int) -> Batch:
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=DIM)
    rows, ys = [], []
    for _ in range(n):
        idx = rng.choice(DIM, size=10, replace=False)
        val = rng.normal(size=10)
        rows.append((idx.tolist(), val.tolist()))
        ys.append(int(truth[idx] @ val + 0.5 * rng.normal() > 0))
    return Batch.from_rows(rows, ys)


def losses(margins: np.ndarray, batch: Batch) -> np.ndarray:
    y = np.where(batch.y == 1, 1.0, -1.0)
    return np.array([log_loss(float(s), float(t)) for s, t in zip(margins, y, strict=True)])


@pytest.mark.parametrize("eta", [1.0, 0.25])
def test_regret_against_the_best_member_is_within_the_bound(eta: float) -> None:
    batch = stream(4000, seed=0)
    ensemble = make_learner("ensemble", DIM, 2, {"members": MEMBERS, "eta": eta})
    flags, margins = ensemble.learn_scored(batch)
    ours = float(losses(margins, batch).sum())
    # each member alone: the same margins it had inside the ensemble
    per_row = []
    for k, member in enumerate(MEMBERS):
        alone = make_learner(member["algorithm"], DIM, 2, member.get("params", {}))
        _, m = alone.learn_scored(batch)
        per_row.append(losses(m, batch))
        metrics = ensemble.member_metrics()[k]
        assert metrics["mistakes"] == alone.mistakes and metrics["updates"] == alone.updates
        assert metrics["log_loss"] == pytest.approx(per_row[-1].sum(), rel=1e-12)
    table = np.array(per_row)
    totals = table.sum(axis=1)
    best = int(np.argmin(totals))
    assert totals[best] < 0.9 * np.sort(totals)[1]  # one member is clearly best
    spread = table.max(axis=0) - table.min(axis=0)
    bound = math.log(len(MEMBERS)) / eta + eta / 8 * float((spread**2).sum())
    assert ours <= totals[best] + bound + 1e-9
    assert ours - totals[best] < math.log(len(MEMBERS)) / eta + 5.0  # and small in practice
    weights = [m["weight"] for m in ensemble.member_metrics()]
    assert weights[best] > 0.99 and sum(weights) == pytest.approx(1.0)
    assert ensemble.mistakes == int(flags.sum()) and ensemble.examples_seen == batch.n


def test_members_learn_exactly_as_alone_and_the_margin_is_their_mixture() -> None:
    batch = stream(500, seed=1)
    ensemble = make_learner("ensemble", DIM, 2, {"members": MEMBERS})
    state = ensemble.get_state()
    loss = np.zeros(len(MEMBERS))
    for i in range(batch.n):  # reference: α from the losses so far, the members' margins
        row = batch.row(i)
        alpha = np.exp(-(loss - loss.min()))
        alpha /= alpha.sum()
        member_margins = [float(ensemble._learners[k].decision(row)[0]) for k in range(3)]
        _, m = ensemble.learn_scored(row)
        assert m[0] == pytest.approx(float(alpha @ member_margins), rel=1e-12, abs=1e-15)
        y = 1.0 if row.y[0] == 1 else -1.0
        loss += [log_loss(s, y) for s in member_margins]
    np.testing.assert_allclose(ensemble.get_state()["loss"], loss, rtol=1e-12)
    for k, member in enumerate(MEMBERS):
        alone = make_learner(member["algorithm"], DIM, 2, member.get("params", {}))
        alone.learn(batch)
        got = {key[3:]: v for key, v in ensemble.get_state().items() if key.startswith(f"m{k}.")}
        assert got.keys() == alone.get_state().keys()
        for key, value in alone.get_state().items():
            if isinstance(value, np.ndarray):
                assert value.tobytes() == got[key].tobytes()
            else:
                assert value == got[key]
    assert set(state) == set(ensemble.get_state())


def test_served_model_is_the_weighted_sum_of_the_members() -> None:
    batch = stream(300, seed=2)
    ensemble = make_learner("ensemble", DIM, 2, {"members": MEMBERS})
    ensemble.learn(batch)
    alpha = np.array([m["weight"] for m in ensemble.member_metrics()])
    W = sum(a * m.serving().W for a, m in zip(alpha, ensemble._learners, strict=True))
    np.testing.assert_allclose(ensemble.serving().W, W, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(
        ensemble.serving().margins(batch), ensemble.decision(batch), rtol=1e-9, atol=1e-12
    )


def test_bad_state_leaves_the_ensemble_untouched() -> None:
    ensemble = make_learner("ensemble", DIM, 2, {"members": MEMBERS})
    ensemble.learn(stream(100, seed=3))
    state = ensemble.get_state()
    for broken in (
        {k: v for k, v in state.items() if k != "m1.wgs"},
        {**state, "m7.w": np.zeros(DIM)},
        {**state, "loss": np.zeros(2)},
    ):
        with pytest.raises(ValueError):
            ensemble.set_state(broken)
        after = ensemble.get_state()
        assert all(
            np.array_equal(after[k], state[k]) if isinstance(state[k], np.ndarray)
            else after[k] == state[k]
            for k in state
        )  # fmt: skip


def test_members_params_and_thick() -> None:
    e = make_learner(
        "ensemble", 8, 2,
        {"members": [{"algorithm": "pa1", "params": {"C": 0.5, "thick": {"margin": 1}}},
                     {"algorithm": "logistic"}], "eta": 0.5},
    )  # fmt: skip
    assert e.params == {
        "members": [
            {"algorithm": "pa1", "params": {"C": 0.5, "thick": {"margin": 1.0, "repeats": 1}}},
            {"algorithm": "logistic", "params": make_learner("logistic", 8, 2, {}).params},
        ],
        "eta": 0.5,
    }
    assert make_learner("ensemble", 8, 2, e.params).params == e.params
    spec = ModelSpec.from_dict({"algorithm": "ensemble", "bits": 8, "params": e.params})
    assert ModelSpec.from_dict(spec.to_dict()) == spec and spec.params == e.params
    assert make_learner("perceptron", 8, 2, {}).member_metrics() is None


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"members": [{"algorithm": "pa1"}]}, "2 to 16"),
        ({"members": "pa1,pa2"}, "list"),
        ({"members": [{"algorithm": "pa1"}, {"algorithm": "ensemble"}]}, "members[1]"),
        ({"members": [{"algorithm": "pa1"}, {"algo": "pa2"}]}, "members[1]"),
        ({"members": [{"algorithm": "pa1"}, {"algorithm": "nope"}]}, "members[1]"),
        ({"members": [{"algorithm": "pa1", "params": {"C": -1}}, {"algorithm": "pa"}]}, "C must"),
        ({"eta": 0}, "eta must be > 0"),
        ({"thick": {"margin": 1}}, "thick applies"),
    ],
)
def test_bad_members_are_rejected_by_name(params: dict[str, Any], needle: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        make_learner("ensemble", 8, 2, params)
    assert needle in str(info.value)
    assert info.value.field is not None and info.value.field.startswith("params.")
