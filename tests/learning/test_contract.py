"""The contract every registered learner keeps (River's ``checks`` in spirit).

Parametrized over the whole registry, so a learner registered later (the multi-class forms)
is checked as soon as it exists: binary learners get two classes, multi-class ones three.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from service.errors import InvalidSpec
from service.learning.batch import Batch
from service.learning.linear import Learner
from service.learning.registry import REGISTRY, make_learner

KEYS = sorted(REGISTRY, key=lambda k: (k[1], k[0]))
IDS = [f"{name}{'-multi' if multi else ''}" for name, multi in KEYS]
DIM = 64


def n_classes(multi: bool) -> int:
    return 3 if multi else 2


def build(key: tuple[str, bool], **params: Any) -> Learner:
    return make_learner(key[0], DIM, n_classes(key[1]), params)


def random_rows(
    n: int, k: int, seed: int, lo: int = 0, hi: int = DIM
) -> tuple[list[tuple[list[int], list[float]]], list[int]]:
    """Sparse rows over features [lo, hi) with labels from a noisy linear rule over k classes."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=(k, DIM))
    rows, ys = [], []
    for _ in range(n):
        idx = rng.choice(np.arange(lo, hi), size=int(rng.integers(1, 9)), replace=False)
        val = rng.normal(size=idx.shape[0])
        rows.append((idx.tolist(), val.tolist()))
        ys.append(int(np.argmax(truth[:, idx] @ val + 0.3 * rng.normal(size=k))))
    return rows, ys


def random_batch(key: tuple[str, bool], n: int = 300, seed: int = 0, **kw: Any) -> Batch:
    rows, ys = random_rows(n, n_classes(key[1]), seed, **kw)
    return Batch.from_rows(rows, ys)


def assert_same_state(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], np.ndarray):
            assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
            assert a[key].tobytes() == b[key].tobytes(), key  # bit for bit, NaN-safe
        else:
            assert type(a[key]) is type(b[key]) and a[key] == b[key], key


pytestmark = pytest.mark.parametrize("key", KEYS, ids=IDS)


def test_registry_key_matches_class(key: tuple[str, bool]) -> None:
    cls = REGISTRY[key]
    assert (cls.name, cls.multiclass) == key
    learner = build(key)
    assert type(learner) is cls
    assert repr(learner).startswith(cls.__name__ + "(")
    again = make_learner(key[0], DIM, n_classes(key[1]), learner.params)
    assert again.params == learner.params


def test_input_batch_not_mutated(key: tuple[str, bool]) -> None:
    batch = random_batch(key)
    before = [a.copy() for a in (batch.indptr, batch.indices, batch.data, batch.y)]
    learner = build(key)
    learner.learn(batch)
    learner.decision(batch)
    learner.serving().proba(batch)
    for a, b in zip(before, (batch.indptr, batch.indices, batch.data, batch.y), strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_counters_and_progressive_mistakes(key: tuple[str, bool]) -> None:
    """A mistake is the label the model *as served* predicted just before learning."""
    batch = random_batch(key, n=200, seed=1)
    learner = build(key)
    flags = []
    for i in range(batch.n):
        row = batch.row(i)
        predicted = int(learner.serving().predict(row)[0])
        flags.append(bool(learner.learn(row)[0]))
        assert flags[-1] == (predicted != int(row.y[0])), f"row {i}"
    assert learner.examples_seen == batch.n
    assert learner.mistakes == sum(flags) > 0
    assert learner.updates > 0
    norms = [math.sqrt(sum(v * v for v in batch.row(i).data)) for i in range(batch.n)]
    assert learner.max_norm == pytest.approx(max(norms), rel=1e-12)


def test_batch_equals_per_row_loop(key: tuple[str, bool]) -> None:
    batch = random_batch(key, n=300, seed=2)
    whole, rowwise = build(key), build(key)
    flags_whole = whole.learn(batch)
    flags_rows = np.array([rowwise.learn(batch.row(i))[0] for i in range(batch.n)])
    assert np.array_equal(flags_whole, flags_rows)
    assert_same_state(whole.get_state(), rowwise.get_state())


def test_any_chunking_of_the_stream_gives_the_same_state(key: tuple[str, bool]) -> None:
    """Workers see the stream cut into batches wherever reads happen to fall, and a restart
    resumes mid-stream: the learned state must not depend on where the cuts are."""
    batch = random_batch(key, n=240, seed=10)
    reference = build(key)
    reference.learn(batch)
    rng = np.random.default_rng(11)
    for _ in range(3):
        cuts = np.sort(
            rng.choice(np.arange(1, batch.n), size=int(rng.integers(1, 12)), replace=False)
        )
        learner = build(key)
        flags = [
            learner.learn(batch.slice(a, b))
            for a, b in zip([0, *cuts], [*cuts, batch.n], strict=True)
        ]
        assert learner.counters() == reference.counters()
        assert_same_state(learner.get_state(), reference.get_state())
        assert int(np.concatenate(flags).sum()) == reference.mistakes


def test_batch_equals_per_row_loop_on_long_rows(key: tuple[str, bool]) -> None:
    """Rows long enough for the compiled dot products to be vectorised: the summation order
    must depend on the row alone, never on where the row sits in the batch."""
    rng = np.random.default_rng(9)
    rows, ys = [], []
    for _ in range(120):
        idx = rng.choice(DIM, size=int(rng.integers(20, DIM)), replace=False)
        rows.append((idx.tolist(), rng.normal(size=idx.shape[0]).tolist()))
        ys.append(int(rng.integers(0, n_classes(key[1]))))
    batch = Batch.from_rows(rows, ys)
    whole, rowwise = build(key), build(key)
    flags_whole = whole.learn(batch)
    flags_rows = np.array([rowwise.learn(batch.row(i))[0] for i in range(batch.n)])
    assert np.array_equal(flags_whole, flags_rows)
    assert_same_state(whole.get_state(), rowwise.get_state())
    decisions = np.concatenate([whole.decision(batch.row(i)) for i in range(batch.n)])
    assert whole.decision(batch).tobytes() == decisions.tobytes()


def test_decision_matches_serving(key: tuple[str, bool]) -> None:
    batch = random_batch(key, n=200, seed=3)
    learner = build(key)
    learner.learn(batch)
    model = learner.serving()
    np.testing.assert_allclose(learner.decision(batch), model.margins(batch), rtol=1e-9, atol=1e-9)
    proba = model.proba(batch)
    assert np.all((proba >= 0) & (proba <= 1))
    if key[1]:
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)


def test_feature_order_irrelevant(key: tuple[str, bool]) -> None:
    rows, ys = random_rows(200, n_classes(key[1]), seed=4)
    rng = np.random.default_rng(0)
    shuffled = []
    for idx, val in rows:
        perm = rng.permutation(len(idx))
        shuffled.append(([idx[p] for p in perm], [val[p] for p in perm]))
    a, b = build(key), build(key)
    assert np.array_equal(
        a.learn(Batch.from_rows(rows, ys)), b.learn(Batch.from_rows(shuffled, ys))
    )
    assert_same_state(a.get_state(), b.get_state())


def test_unseen_and_vanishing_features(key: tuple[str, bool]) -> None:
    """Features appear late, others vanish; a never-seen feature has weight exactly 0."""
    learner = build(key)
    learner.learn(random_batch(key, n=150, seed=5, lo=0, hi=20))
    learner.learn(random_batch(key, n=150, seed=6, lo=20, hi=40))
    learner.learn(Batch.from_rows([([], [])], [0]))  # a row with no features at all
    W = learner.serving().W
    assert np.all(np.isfinite(W))
    assert not np.any(W[..., 40:])  # never seen: untouched
    # seen late: learned (in the state; the pocket may rightly still serve older weights)
    # (arrays are (dim,), (K, dim) or (dim, 2): the feature axis is the one of length DIM)
    arrays = [a for a in learner.get_state().values() if isinstance(a, np.ndarray)]
    assert any(
        np.any(np.take(a, range(20, 40), axis=a.shape.index(DIM))) for a in arrays if DIM in a.shape
    )
    only_unseen = Batch.from_rows([([50], [3.0])], [0])
    empty = Batch.from_rows([([], [])], [0])
    np.testing.assert_array_equal(learner.decision(only_unseen), learner.decision(empty))


def test_state_round_trips_exactly_and_continues_bit_identically(key: tuple[str, bool]) -> None:
    from service.store.codec import decode_state, encode_state

    first, second = random_batch(key, n=200, seed=7), random_batch(key, n=200, seed=8)
    original = build(key)
    original.learn(first)
    state = original.get_state()
    restored = build(key)
    restored.set_state(decode_state(encode_state(state)))
    assert_same_state(restored.get_state(), state)
    assert restored.counters() == original.counters()
    assert np.array_equal(original.learn(second), restored.learn(second))
    assert_same_state(original.get_state(), restored.get_state())
    # get_state is a copy: learning afterwards does not change a state taken before
    assert_same_state(state, decode_state(encode_state(state)))
    with pytest.raises(ValueError):
        restored.set_state({k: v for k, v in state.items() if k != "examples_seen"})


def test_bad_hyper_parameters_rejected_by_name(key: tuple[str, bool]) -> None:
    cls = REGISTRY[key]
    k = n_classes(key[1])
    with pytest.raises(InvalidSpec) as info:
        make_learner(key[0], DIM, k, {"no_such_param": 1})
    assert info.value.field == "params.no_such_param"
    with pytest.raises(InvalidSpec) as info:
        make_learner(key[0], 0, k, {})
    assert info.value.field == "dim"
    for name, default in cls.defaults().items():
        if isinstance(default, bool):
            bad: list[Any] = ["maybe", 2]
        elif isinstance(default, int | float):
            bad = ["not-a-number", math.nan, math.inf, None]
        elif isinstance(default, str):
            bad = ["no-such-choice", 3]
        else:
            continue
        for value in bad:
            with pytest.raises((InvalidSpec, ValueError)) as err:
                make_learner(key[0], DIM, k, {name: value})
            assert name in str(err.value), (name, value, str(err.value))
            assert repr(value) in str(err.value) or str(value) in str(err.value)
            if isinstance(err.value, InvalidSpec):
                assert err.value.field == f"params.{name}"


def test_bad_batches_rejected(key: tuple[str, bool]) -> None:
    learner = build(key)
    with pytest.raises(ValueError, match="index"):
        learner.learn(Batch.from_rows([([DIM], [1.0])], [0]))
    with pytest.raises(ValueError, match="label"):
        learner.learn(Batch.from_rows([([0], [1.0])], [n_classes(key[1])]))
    with pytest.raises(ValueError, match="label"):
        learner.learn(Batch.from_rows([([0], [1.0])], [-1]))
    assert learner.examples_seen == 0
    assert learner.learn(Batch.empty()).shape == (0,)


def _long_rows_batch(key: tuple[str, bool], n: int, seed: int) -> Batch:
    rng = np.random.default_rng(seed)
    rows, ys = [], []
    for i in range(n):
        size = int(rng.integers(20, DIM)) if i % 2 else int(rng.integers(1, 6))
        idx = rng.choice(DIM, size=size, replace=False)
        rows.append((idx.tolist(), rng.normal(size=idx.shape[0]).tolist()))
        ys.append(int(rng.integers(0, n_classes(key[1]))))
    return Batch.from_rows(rows, ys)


@pytest.mark.parametrize("stream", ["short", "long"])
def test_returned_margins_are_the_served_margins_before_each_row(
    key: tuple[str, bool], stream: str
) -> None:
    """``learn(batch, margins=m)`` writes, for every row, exactly what ``decision()`` of the
    learner as it stood just before that row gives — in the kernel's own pass — and the
    mistake flags are the labels those margins predict, wrong."""
    batch = (
        random_batch(key, n=250, seed=12) if stream == "short" else _long_rows_batch(key, 150, 13)
    )
    learner, probe = build(key), build(key)
    flags, margins = learner.learn_scored(batch)
    assert margins.dtype == np.float64 and margins.shape == learner.margins_shape(batch.n)
    for i in range(batch.n):
        row = batch.row(i)
        expected = probe.decision(row)[0]
        assert margins[i].tobytes() == expected.tobytes(), (i, margins[i], expected)
        probe.learn(row)
    predicted = np.argmax(margins, axis=1) if key[1] else (margins > 0).astype(int)
    np.testing.assert_array_equal(flags, predicted != batch.y)
    assert_same_state(learner.get_state(), probe.get_state())
    # the same through learn(batch, margins=...) on a caller's array, and without margins
    again, out = build(key), np.full(learner.margins_shape(batch.n), np.nan)
    np.testing.assert_array_equal(again.learn(batch, margins=out), flags)
    assert out.tobytes() == margins.tobytes()
    plain = build(key)
    np.testing.assert_array_equal(plain.learn(batch), flags)
    assert_same_state(plain.get_state(), learner.get_state())


def test_margins_array_is_checked(key: tuple[str, bool]) -> None:
    learner = build(key)
    batch = random_batch(key, n=4)
    shape = learner.margins_shape(4)
    for bad in (np.empty(5), np.empty(shape, dtype=np.float32), np.empty((4, 7)), [0.0] * 4):
        with pytest.raises(ValueError, match="margins must be"):
            learner.learn(batch, margins=bad)  # type: ignore[arg-type]
    assert learner.examples_seen == 0


def test_extreme_values_never_raise(key: tuple[str, bool]) -> None:
    """Tiny, huge and zero values (underflow, overflow) must not make a kernel raise: a worker
    has to get through any batch the featurizer let in."""
    rows = [([0], [1e-300]), ([1], [1e300]), ([2, 3], [0.0, 1e-200]), ([], []), ([4], [1.0])]
    labels = [i % n_classes(key[1]) for i in range(len(rows) * 20)]
    learner = build(key)
    flags, margins = learner.learn_scored(Batch.from_rows(rows * 20, labels))
    assert flags.shape == (100,) and margins.shape == learner.margins_shape(100)
    assert learner.examples_seen == 100
