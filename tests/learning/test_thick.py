"""The thick threshold (``params.thick``): train only on or near errors, for every binary
learner — compiled in each kernel, so checked here against plain-Python simulations built
from the learners themselves."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from service.errors import InvalidSpec
from service.learning.batch import Batch
from service.learning.linear import Learner
from service.learning.registry import REGISTRY, make_learner
from service.learning.spec import ModelSpec

DIM = 48
BINARY = sorted(name for (name, multi), cls in REGISTRY.items() if not multi and cls.supports_thick)
THICK = {"margin": 0.5, "repeats": 3}


def stream(n: int, seed: int) -> Batch:
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=DIM)
    rows, ys = [], []
    for _ in range(n):
        idx = rng.choice(DIM, size=int(rng.integers(1, 9)), replace=False)
        val = rng.normal(size=idx.size)
        rows.append((idx.tolist(), val.tolist()))
        ys.append(int(truth[idx] @ val + 0.3 * rng.normal() > 0))
    return Batch.from_rows(rows, ys)


def arrays(learner: Learner) -> dict[str, Any]:
    """The learned state without the counters (which move on every row)."""
    state = learner.get_state()
    for key in ("examples_seen", "mistakes", "updates", "max_norm"):
        state.pop(key)
    return state


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(
        (a[k].tobytes() == b[k].tobytes()) if isinstance(a[k], np.ndarray) else a[k] == b[k]
        for k in a
    )


@pytest.mark.parametrize("name", BINARY)
def test_thick_rows_outside_the_band_are_not_learned(name: str) -> None:
    """Row by row: the served margins are those decision() gives before the row, mistakes are
    counted against them, and a row with y·s above the margin leaves the learner unchanged
    (pegasos: but its step counter t)."""
    batch = stream(300, seed=1)
    learner = make_learner(name, DIM, 2, {"thick": THICK})
    outside = 0
    for i in range(batch.n):
        row = batch.row(i)
        before, s = arrays(learner), float(learner.decision(row)[0])
        flags, margins = learner.learn_scored(row)
        assert margins[0] == s and flags[0] == ((s > 0) != (row.y[0] == 1))
        if (1 if row.y[0] == 1 else -1) * s > THICK["margin"]:
            outside += 1
            assert same(arrays(learner), before), i
    assert learner.examples_seen == batch.n and 20 < outside < batch.n - 20


@pytest.mark.parametrize("name", BINARY)
def test_thick_batch_equals_rows_and_any_chunking(name: str) -> None:
    batch = stream(300, seed=2)
    whole = make_learner(name, DIM, 2, {"thick": THICK})
    flags, margins = whole.learn_scored(batch)
    rows = make_learner(name, DIM, 2, {"thick": THICK})
    for i in range(batch.n):
        f, m = rows.learn_scored(batch.row(i))
        assert f[0] == flags[i] and m.tobytes() == margins[i : i + 1].tobytes()
    assert same(whole.get_state(), rows.get_state())
    chunked = make_learner(name, DIM, 2, {"thick": THICK})
    for a, b in ((0, 7), (7, 150), (150, 151), (151, 300)):
        chunked.learn(batch.slice(a, b))
    assert same(whole.get_state(), chunked.get_state())
    plain = make_learner(name, DIM, 2, {})
    plain.learn(batch)
    assert whole.updates < plain.updates or name in ("perceptron", "pocket", "mira")


@pytest.mark.parametrize("name", ["pa", "pa1", "pa2", "logistic", "adagrad"])
def test_thick_once_equals_learning_only_the_rows_in_the_band(name: str) -> None:
    """For learners whose step does not depend on how many rows were seen, repeats = 1 is
    exactly "learn the rows with y·s ≤ m, skip the others" (here done row by row in Python)."""
    batch = stream(400, seed=3)
    thick = make_learner(name, DIM, 2, {"thick": {"margin": 0.3}})
    thick.learn(batch)
    reference = make_learner(name, DIM, 2, {})
    for i in range(batch.n):
        row = batch.row(i)
        y = 1 if row.y[0] == 1 else -1
        if y * float(reference.decision(row)[0]) <= 0.3:
            reference.learn(row)
    assert same(arrays(thick), arrays(reference))


@pytest.mark.parametrize("name", ["pa1", "adagrad", "logistic"])
def test_thick_repeats_learn_the_row_again_while_it_stays_in_the_band(name: str) -> None:
    batch = stream(300, seed=4)
    thick = make_learner(name, DIM, 2, {"thick": {"margin": 2.0, "repeats": 4}})
    thick.learn(batch)
    reference = make_learner(name, DIM, 2, {})
    for i in range(batch.n):
        row = batch.row(i)
        y = 1 if row.y[0] == 1 else -1
        for _ in range(4):
            before = arrays(reference)
            if y * float(reference.decision(row)[0]) > 2.0:
                break
            reference.learn(row)
            if same(before, arrays(reference)):
                break
    if name == "adagrad":  # a repeat is the row learned again, exactly
        assert same(arrays(thick), arrays(reference))
    else:  # the regularisation (logistic: none here) and the step are as learn(row) again
        ref, got = arrays(reference), arrays(thick)
        for key in ref:
            np.testing.assert_allclose(got[key], ref[key], rtol=1e-12, atol=1e-12)


def test_thick_perceptron_is_the_perceptron_with_margin() -> None:
    """Mistake-driven rules update on y·s ≤ m: one example, margin 2.5, up to 10 repeats —
    w, b go 1, 2 (s = 2 ≤ 2.5, again), then s = 4 > 2.5 stops it."""
    one = Batch.from_rows([([0], [1.0])], [1])
    for repeats, expected in ((1, 1.0), (10, 2.0)):
        p = make_learner("perceptron", 1, 2, {"thick": {"margin": 2.5, "repeats": repeats}})
        assert p.learn(one).tolist() == [True]  # s = 0 served: a mistake, counted once
        assert p.serving().W.tolist() == [expected] and p.serving().b == expected
        assert (p.examples_seen, p.mistakes, p.updates) == (1, 1, 1)


def test_thick_validation() -> None:
    learner = make_learner("pa1", 4, 2, {"thick": '{"margin": 1, "repeats": 2}'})
    assert learner.params == {"C": 1.0, "thick": {"margin": 1.0, "repeats": 2}}
    assert make_learner("pa1", 4, 2, {"thick": None}).params == {"C": 1.0}
    bad: list[Any] = [
        {"repeats": 2},
        {"margin": -1},
        {"margin": float("inf")},
        {"margin": 1, "repeats": 0},
        {"margin": 1, "repeats": 1.5},
        {"margin": 1, "repeats": 101},
        {"margin": 1, "times": 2},
        "margin=1",
        3,
    ]
    for value in bad:
        with pytest.raises(InvalidSpec) as info:
            make_learner("pa1", 4, 2, {"thick": value})
        assert info.value.field is not None and info.value.field.startswith("params.thick")
    with pytest.raises(InvalidSpec, match="binary") as info:
        make_learner("pa1", 4, 3, {"thick": THICK})
    assert info.value.field == "params.thick"


def test_thick_in_a_spec_round_trips() -> None:
    spec = ModelSpec.from_dict(
        {"algorithm": "adagrad", "params": {"thick": {"margin": 0.25}}, "bits": 8}
    )
    assert spec.params["thick"] == {"margin": 0.25, "repeats": 1}
    assert ModelSpec.from_dict(spec.to_dict()) == spec
    assert spec.build_learner().params["thick"] == {"margin": 0.25, "repeats": 1}
    # the spam preset keeps its params and takes the option on top
    spam = ModelSpec.from_dict({"preset": "spam", "params": {"thick": {"margin": 1.0}}})
    assert spam.params["thick"] == {"margin": 1.0, "repeats": 1} and "lr" in spam.params
    with pytest.raises(InvalidSpec) as info:
        ModelSpec.from_dict({"algorithm": "pa1", "classes": [1, 2, 3], "params": {"thick": THICK}})
    assert info.value.field == "params.thick"
