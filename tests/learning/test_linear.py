"""LinearModel (what is served), the registry and the validation helpers."""

from __future__ import annotations

import numpy as np
import pytest

from service.errors import InvalidSpec
from service.learning.batch import Batch
from service.learning.linear import InvalidParameter, Learner, LinearModel, one_of, positive
from service.learning.registry import REGISTRY, algorithms, learner_class, make_learner

BINARY = {
    "perceptron",
    "averaged_perceptron",
    "pocket",
    "mira",
    "pa",
    "pa1",
    "pa2",
    "pegasos",
    "logistic",
}


def test_every_binary_algorithm_is_registered() -> None:
    assert set(algorithms(multiclass=False)) >= BINARY
    for name in BINARY:
        assert REGISTRY[(name, False)].name == name


def test_binary_margins_predict_and_proba() -> None:
    model = LinearModel(np.array([1.0, -2.0, 0.0]), 0.5)
    batch = Batch.from_rows([([0], [1.0]), ([1], [1.0]), ([], []), ([0, 1], [2.0, 1.25])], [-1] * 4)
    assert model.margins(batch).tolist() == [1.5, -1.5, 0.5, 0.0]
    assert model.predict(batch).tolist() == [1, 0, 1, 0]  # s = 0 is the negative class
    proba = model.proba(batch)
    np.testing.assert_allclose(proba, 1 / (1 + np.exp(-model.margins(batch))))


def test_sigmoid_survives_huge_margins() -> None:
    model = LinearModel(np.array([1.0]), 0.0)
    batch = Batch.from_rows([([0], [1e308]), ([0], [-1e308]), ([0], [800.0])], [-1] * 3)
    with np.errstate(over="raise"):
        assert model.proba(batch).tolist() == [1.0, 0.0, 1.0]


def test_multiclass_margins_and_softmax() -> None:
    W = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    model = LinearModel(W, np.array([0.0, 0.0, 0.25]), link="softmax")
    assert model.multiclass and model.dim == 2
    batch = Batch.from_rows([([0], [2.0]), ([1], [1e6]), ([], [])], [-1] * 3)
    np.testing.assert_array_equal(
        model.margins(batch), [[2.0, 0.0, 0.25], [0.0, 1e6, 0.25], [0, 0, 0.25]]
    )
    assert model.predict(batch).tolist() == [0, 1, 2]
    proba = model.proba(batch)
    assert np.all(np.isfinite(proba))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert proba[1, 1] == 1.0


def test_linear_model_state_round_trip_and_index_check() -> None:
    model = LinearModel(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0.5, -0.5]), "softmax")
    again = LinearModel.from_state(model.get_state())
    np.testing.assert_array_equal(again.W, model.W)
    np.testing.assert_array_equal(again.b, model.b)
    assert again.link == "softmax"
    with pytest.raises(ValueError, match=r"feature index must be in \[0, 2\), got 2"):
        model.margins(Batch.from_rows([([2], [1.0])], [-1]))


def test_serving_is_a_snapshot() -> None:
    learner = make_learner("perceptron", 3, 2, {})
    learner.learn(Batch.from_rows([([0], [1.0])], [1]))
    snapshot = learner.serving()
    learner.learn(Batch.from_rows([([0], [1.0])], [0]))
    assert snapshot.W.tolist() == [1.0, 0.0, 0.0] and snapshot.b == 1.0
    assert learner.serving().W.tolist() == [0.0, 0.0, 0.0]


def test_make_learner_errors_name_the_field() -> None:
    with pytest.raises(InvalidSpec) as info:
        make_learner("no-such-algorithm", 8, 2, {})
    assert info.value.field == "algorithm" and "no-such-algorithm" in info.value.message
    with pytest.raises(InvalidSpec) as info:
        make_learner("pa1", 8, 2, {"C": 0})
    assert info.value.field == "params.C"
    assert str(info.value) == "C must be > 0, got 0"
    assert isinstance(info.value, ValueError)
    with pytest.raises(InvalidSpec) as info:
        make_learner("pa1", 8, 2, {"c": 1.0})
    assert info.value.field == "params.c"
    with pytest.raises(InvalidSpec) as info:
        learner_class("pa1", n_classes=2)(8, n_classes=3)
    assert info.value.field == "classes"


def test_make_learner_coerces_command_line_strings() -> None:
    learner = make_learner("pegasos", 8, 2, {"lam": "0.5", "projection": "true"})
    assert learner.params == {"lam": 0.5, "projection": True, "bias": False}
    learner = make_learner("logistic", 8, 2, {"schedule": "invscaling", "l1": "1e-4"})
    assert learner.params["schedule"] == "invscaling" and learner.params["l1"] == 1e-4


def test_params_are_the_init_arguments() -> None:
    learner = make_learner("mira", 8, 2, {"C": 2, "margin": 0.5})
    assert learner.params == {"C": 2.0, "margin": 0.5}
    assert repr(learner) == "MIRA(dim=8, C=2.0, margin=0.5)"
    assert make_learner("perceptron", 8, 2, {}).params == {}


def test_validation_helpers() -> None:
    assert positive("C", 3) == 3.0
    for bad in (0, -1, float("nan"), True, "1"):
        with pytest.raises(InvalidParameter, match="C must be"):
            positive("C", bad)
    assert one_of("mode", "a", ("a", "b")) == "a"
    with pytest.raises(InvalidParameter, match=r"mode must be one of \['a', 'b'\], got 'c'"):
        one_of("mode", "c", ("a", "b"))


def test_subclass_contract_is_small() -> None:
    """A new algorithm: a kernel call, its arrays, its served weights (here in plain numpy)."""

    class Constant(Learner):
        name = "constant-test"
        _float_slots = ("b",)

        def __init__(self, dim: int, n_classes: int = 2, level: float = 1.0):
            self.level = positive("level", level)
            super().__init__(dim, n_classes)

        def _learn(self, batch: Batch, out: np.ndarray, margins: np.ndarray) -> None:
            margins[:] = self._f[1]
            out[:] = batch.y != 1
            self._c[0] += batch.n
            self._c[1] += int(out.sum())
            self._f[1] = self.level

        def _served(self) -> tuple[np.ndarray, float]:
            return self.w, float(self._f[1])

    c = Constant(4, level=2.0)
    c.learn(Batch.from_rows([([0], [1.0]), ([1], [1.0])], [1, 0]))
    assert c.counters() == {"examples_seen": 2, "mistakes": 1, "updates": 0, "max_norm": 0.0}
    assert c.get_state()["b"] == 2.0 and c.params == {"level": 2.0}
    assert c.decision(Batch.from_rows([([3], [1.0])], [-1])).tolist() == [2.0]


def test_softmax_survives_logits_at_the_float_limit() -> None:
    W = np.array([[1e308, 0.0], [-1e308, 0.0], [0.0, 1e308]])
    model = LinearModel(W, np.zeros(3), link="softmax")
    batch = Batch.from_rows([([0], [1.0]), ([1], [1e10]), ([], [])], [-1] * 3)
    proba = model.proba(batch)
    np.testing.assert_array_equal(proba, [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [1 / 3, 1 / 3, 1 / 3]])
