"""Known answers for the multi-class ``adagrad`` (one-against-all, ``vw --oaa K``): K runs of
the plain binary transcription of VW's update, the served margins, the state, the spec, and
Vowpal Wabbit's ``--oaa`` itself when it is installed."""

from __future__ import annotations

import numpy as np
import pytest

from service.learning.adagrad import LOSSES
from service.learning.batch import Batch
from service.learning.multiclass_adagrad import MulticlassAdaGrad
from service.learning.registry import make_learner
from service.learning.spec import ModelSpec
from tests.learning.test_binary_adagrad import reference

K = 4


def oaa_stream(
    n: int, dim: int, k: int, seed: int
) -> tuple[list[tuple[list[int], list[float]]], list[int]]:
    """Features on scales from 0.1 to 10 that also vary per row (so ``s`` rescales), labels
    from a noisy linear rule over k classes."""
    rng = np.random.default_rng(seed)
    scales = 10.0 ** rng.uniform(-1, 1, size=dim)
    truth = rng.normal(size=(k, dim)) / scales
    rows, ys = [], []
    for _ in range(n):
        idx = np.sort(rng.choice(dim, size=int(rng.integers(1, 7)), replace=False))
        val = rng.normal(size=idx.size) * scales[idx] * rng.uniform(0.5, 2.0, size=idx.size)
        rows.append((idx.tolist(), val.tolist()))
        ys.append(int(np.argmax(truth[:, idx] @ val + 0.5 * rng.normal(size=k))))
    return rows, ys


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize(("invariant", "bias"), [(True, True), (False, True), (True, False)])
def test_each_class_row_is_the_binary_reference_on_its_one_against_all_labels(
    loss: str, invariant: bool, bias: bool
) -> None:
    """Row r is VW's binary update learning y = +1 for class r, −1 otherwise; its statistics
    (G, s, T, N) are its own, so K runs of the plain-Python transcription give every served
    score, the mistakes and the weights."""
    dim = 25
    rows, ys = oaa_stream(700, dim, K, seed=1)
    params = {"lr": 0.5, "loss": loss, "invariant": invariant, "bias": bias}
    model = make_learner("adagrad", dim, K, params)
    assert isinstance(model, MulticlassAdaGrad)
    flags, margins = model.learn_scored(Batch.from_rows(rows, ys))
    served = model.serving()
    assert served.W.shape == (K, dim) and served.link == "softmax"
    expected = np.empty((len(rows), K))
    # float64 on both sides, to the binary test's tolerance: the kernel solves the logistic
    # flow by Newton, the reference by bisection, and 700 examples of feedback carry their
    # last-bit differences (up to ~5e-11 relative here)
    tol = 1e-12 * max(1.0, float(np.abs(margins).max()))
    for r in range(K):
        binary = [(idx, val, int(y == r)) for (idx, val), y in zip(rows, ys, strict=True)]
        w, b, ref_margins = reference(binary, 0.5, loss, invariant, bias)
        expected[:, r] = ref_margins
        np.testing.assert_allclose(margins[:, r], ref_margins, rtol=1e-9, atol=tol)
        np.testing.assert_allclose(served.W[r], [w.get(j, 0.0) for j in range(dim)], rtol=1e-9,
                                   atol=tol)  # fmt: skip
        assert served.b[r] == pytest.approx(b, rel=1e-9, abs=tol)
    assert flags.tolist() == (expected.argmax(axis=1) != np.array(ys)).tolist()
    assert 50 < flags.sum() < 0.5 * len(rows)  # a stream with real mistakes, and learned


def test_margins_are_decision_just_before_each_row_and_ties_go_to_the_lowest_class() -> None:
    rows, ys = oaa_stream(300, 30, K, seed=2)
    batch = Batch.from_rows(rows, ys)
    model, probe = (
        make_learner("adagrad", 30, K, {"loss": "hinge"}),
        make_learner("adagrad", 30, K, {"loss": "hinge"}),
    )
    _, margins = model.learn_scored(batch)
    for i in range(batch.n):
        row = batch.row(i)
        assert probe.decision(row)[0].tobytes() == margins[i].tobytes()
        probe.learn(row)
    fresh = make_learner("adagrad", 30, K, {})
    assert fresh.learn(Batch.from_rows([([0], [1.0])], [0])).tolist() == [False]  # all 0: class 0
    assert fresh.learn(Batch.from_rows([([5], [1.0])], [2])).tolist() == [True]


def test_state_round_trips_through_a_c_ordered_copy_and_continues_bit_for_bit() -> None:
    """A commit decodes ``wgs`` in C order; loading it keeps the Fortran layout (one memory
    access per feature) and learning goes on exactly as without the round trip."""
    rows, ys = oaa_stream(600, 40, K, seed=3)
    first, second = Batch.from_rows(rows[:300], ys[:300]), Batch.from_rows(rows[300:], ys[300:])
    whole = make_learner("adagrad", 40, K, {"loss": "modified_huber"})
    whole.learn(first)
    state = {k: np.ascontiguousarray(v) if isinstance(v, np.ndarray) else v
             for k, v in whole.get_state().items()}  # fmt: skip
    assert state["wgs"].flags.c_contiguous and state["wgs"].shape == (3 * K, 40)
    resumed = make_learner("adagrad", 40, K, {"loss": "modified_huber"})
    resumed.set_state(state)
    assert resumed.wgs.flags.f_contiguous
    flags_whole, margins_whole = whole.learn_scored(second)
    flags_resumed, margins_resumed = resumed.learn_scored(second)
    assert flags_whole.tolist() == flags_resumed.tolist()
    assert margins_whole.tobytes() == margins_resumed.tobytes()
    for key, value in whole.get_state().items():
        other = resumed.get_state()[key]
        assert (
            (value.tobytes() == other.tobytes())
            if isinstance(value, np.ndarray)
            else (value == other)
        ), key


def test_a_spec_with_more_than_two_classes_gets_the_one_against_all_form() -> None:
    spec = ModelSpec.from_dict({"algorithm": "adagrad", "classes": ["a", "b", "c"], "bits": 8,
                                "params": {"loss": "hinge", "lr": 0.3}})  # fmt: skip
    learner = spec.build_learner()
    assert isinstance(learner, MulticlassAdaGrad)
    assert (learner.n_classes, learner.loss, learner.lr) == (3, "hinge", 0.3)
    with pytest.raises(ValueError, match="loss must be one of"):
        make_learner("adagrad", 8, 3, {"loss": "exp"})


def test_matches_vowpal_wabbit_one_against_all() -> None:
    """The same stream through ``vw --oaa K`` (float32, approximate inverse square root): the
    K scores agree to ~1e-4 and so do the predictions. VW reports its scores clipped (to
    [−1, 1] for the hinge) and picks its class from the clipped ones, so ties at ±1 can part
    the two there; logistic scores are not clipped in this range."""
    vw_module = pytest.importorskip("vowpalwabbit", reason="vowpalwabbit is not installed")
    dim, bits = 20, 10
    rows, ys = oaa_stream(600, dim, K, seed=3)
    for loss in ("logistic", "hinge"):
        vw = vw_module.Workspace(f"--quiet -b {bits} --loss_function {loss} --oaa {K} --scores")
        vw_scores = []
        for (idx, val), y in zip(rows, ys, strict=True):
            feats = " ".join(f"{j}:{v:.17g}" for j, v in zip(idx, val, strict=True))
            ex = vw.parse(f"{y + 1} | {feats}")
            vw.learn(ex)
            vw_scores.append(ex.get_scalars())
            vw.finish_example(ex)
        vw.finish()
        scores = np.array(vw_scores)
        model = make_learner("adagrad", dim, K, {"loss": loss})
        flags, margins = model.learn_scored(Batch.from_rows(rows, ys))
        if loss == "hinge":
            margins = np.clip(margins, -1.0, 1.0)
        np.testing.assert_allclose(margins, scores, rtol=0, atol=1e-3)
        clear = np.sort(scores, axis=1)[:, -1] - np.sort(scores, axis=1)[:, -2] > 1e-3
        assert clear.mean() > 0.9
        np.testing.assert_array_equal(margins[clear].argmax(1), scores[clear].argmax(1))
        assert abs(int(flags.sum()) - int((scores.argmax(1) != np.array(ys)).sum())) <= 3
