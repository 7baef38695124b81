"""The featurizer: hashing (a known answer from scikit-learn), indices, dense lists, text,
quadratic pairs, labels, and strict validation naming the field and the example."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import mmh3
import numpy as np
import pytest

from service.errors import InvalidExample
from service.learning.batch import Batch
from service.learning.features import Featurizer
from service.learning.labels import Labels
from service.learning.spec import ModelSpec


@dataclass(frozen=True)
class Text:
    word_ngrams: tuple[int, int] | None = (1, 1)
    char_ngrams: tuple[int, int] | None = None
    binary: bool = True
    normalize: bool = False
    char_limit: int | None = None
    email: bool = False
    tokens: tuple[str, ...] = ()


@dataclass(frozen=True)
class Spec:
    dim: int = 2**10
    hashing: bool = True
    classes: tuple[Any, ...] = (-1, 1)
    positive: Any = 1
    text: Text | None = None
    quadratic: tuple[tuple[str, str], ...] = ()
    normalize: bool = False
    transform: str = "none"


def dense(batch: Batch, dim: int) -> np.ndarray:
    out = np.zeros((batch.n, dim))
    for i in range(batch.n):
        lo, hi = batch.indptr[i], batch.indptr[i + 1]
        out[i, batch.indices[lo:hi]] = batch.data[lo:hi]
    return out


def check_csr(batch: Batch, dim: int) -> None:
    assert batch.indptr.dtype == np.int64 and batch.indices.dtype == np.int32
    assert batch.data.dtype == np.float64 and batch.y.dtype == np.int32
    assert batch.indptr[0] == 0 and batch.indptr[-1] == batch.nnz
    for i in range(batch.n):
        idx = batch.indices[batch.indptr[i] : batch.indptr[i + 1]]
        assert np.all(np.diff(idx) > 0), "row indices must be sorted and unique"
    assert batch.nnz == 0 or (batch.indices.min() >= 0 and batch.indices.max() < dim)
    assert np.all(np.isfinite(batch.data))


def random_examples(rng: random.Random, n: int, vocab: int = 300) -> list[dict[str, Any]]:
    return [
        {
            "features": {f"f{rng.randrange(vocab)}": rng.uniform(-5, 5) for _ in range(20)},
            "label": rng.choice([-1, 1]),
        }
        for _ in range(n)
    ]


# --- hashing: the same matrix as scikit-learn's FeatureHasher (alternate_sign=True) ----------


@pytest.mark.parametrize("bits", [4, 10, 18])
def test_hashing_matches_sklearn_feature_hasher(bits: int) -> None:
    sklearn = pytest.importorskip("sklearn.feature_extraction")
    rng = random.Random(bits)
    examples = random_examples(rng, 200, vocab=2000)
    batch = Featurizer(Spec(dim=2**bits)).transform(examples)
    check_csr(batch, 2**bits)
    hasher = sklearn.FeatureHasher(n_features=2**bits, input_type="dict", alternate_sign=True)
    expected = hasher.transform([e["features"] for e in examples]).tocsr()
    expected.sum_duplicates()
    expected.eliminate_zeros()
    expected.sort_indices()
    np.testing.assert_array_equal(batch.indptr, expected.indptr)
    np.testing.assert_array_equal(batch.indices, expected.indices)
    np.testing.assert_allclose(batch.data, expected.data, rtol=0, atol=1e-12)


def test_hash_bucket_and_sign_follow_the_documented_rule() -> None:
    names = [f"name-{i}" for i in range(500)]
    batch = Featurizer(Spec(dim=2**18)).transform(
        [{"features": {name: 1.0}, "label": 1} for name in names]
    )
    for i, name in enumerate(names):
        h = mmh3.hash(name, 0, signed=True)
        assert batch.indices[i] == abs(h) % 2**18
        assert batch.data[i] == (-1.0 if h < 0 else 1.0)


def test_feature_order_is_irrelevant_and_batches_equal_single_examples() -> None:
    rng = random.Random(1)
    examples = random_examples(rng, 50)
    shuffled = []
    for e in examples:
        items = list(e["features"].items())
        rng.shuffle(items)
        shuffled.append({"label": e["label"], "features": dict(items)})
    f = Featurizer(Spec())
    a, b = f.transform(examples), f.transform(shuffled)
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_allclose(a.data, b.data, rtol=1e-15)
    one = Batch.concat([f.transform_one(e, labels=True) for e in examples])
    np.testing.assert_array_equal(one.indices, a.indices)
    np.testing.assert_array_equal(one.data, a.data)
    np.testing.assert_array_equal(one.y, a.y)


def test_a_tiny_cache_gives_the_same_answer() -> None:
    rng = random.Random(2)
    examples = random_examples(rng, 100, vocab=5000)
    big = Featurizer(Spec()).transform(examples)
    tiny = Featurizer(Spec(), cache_size=3)
    for _ in range(2):  # the second pass runs with a cache that was cleared midway
        small = tiny.transform(examples)
        np.testing.assert_array_equal(small.indices, big.indices)
        np.testing.assert_array_equal(small.data, big.data)


# --- no hashing, dense lists, duplicates ------------------------------------------------------


def test_no_hashing_takes_integer_names_as_indices_and_sums_duplicates() -> None:
    f = Featurizer(Spec(dim=5, hashing=False))
    b = f.transform([{"features": {"4": 1.5, "0": 2, 1: 1.0, "1": 0.5}, "label": 0}])
    assert b.indices.tolist() == [0, 1, 4]
    assert b.data.tolist() == [2.0, 1.5, 1.5]
    assert b.y.tolist() == [0]


@pytest.mark.parametrize(
    ("name", "needle"),
    [("5", "out of range"), ("-1", "integer index"), ("x", "integer index"), ("1.0", "integer")],
)
def test_no_hashing_rejects_bad_indices(name: str, needle: str) -> None:
    f = Featurizer(Spec(dim=5, hashing=False))
    with pytest.raises(InvalidExample, match=needle) as e:
        f.transform([{"features": {"0": 1.0}, "label": 1}, {"features": {name: 1.0}, "label": 1}])
    assert e.value.field == f"features.{name}" and e.value.index == 1


def test_dense_lists_have_length_dim_and_zeros_are_dropped() -> None:
    f = Featurizer(Spec(dim=4, hashing=False))
    b = f.transform([{"features": [0.0, 2.0, 0, -1.0], "label": 1}])
    assert b.indices.tolist() == [1, 3] and b.data.tolist() == [2.0, -1.0]
    with pytest.raises(InvalidExample, match="length dim=4") as e:
        f.transform([{"features": [1.0, 2.0], "label": 1}])
    assert e.value.field == "features" and e.value.index == 0
    with pytest.raises(InvalidExample, match="number") as e:
        f.transform(
            [{"features": [1.0, 2.0, 3, 4], "label": 1}, {"features": [1, "2", 3, 4], "label": 1}]
        )
    assert e.value.field == "features[1]" and e.value.index == 1


# --- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        (math.nan, "finite"),
        (math.inf, "finite"),
        (-math.inf, "finite"),
        (1e101, "finite"),
        (10**400, "out of range"),
        (True, "number"),
        ("1.5", "number"),
        (None, "number"),
        ([1], "number"),
    ],
)
def test_bad_values_are_rejected_naming_feature_and_example(value: Any, needle: str) -> None:
    f = Featurizer(Spec())
    examples = [{"features": {"a": 1.0}, "label": 1}] * 3 + [
        {"features": {"a": 1.0, "capitalTotal": value}, "label": 1}
    ]
    with pytest.raises(InvalidExample, match=needle) as e:
        f.transform(examples)
    assert e.value.field == "features.capitalTotal"
    assert e.value.index == 3


def test_large_finite_values_within_the_limit_are_accepted() -> None:
    b = Featurizer(Spec(dim=2, hashing=False)).transform(
        [{"features": {"0": 1e100, "1": -(10**50)}, "label": 1}]
    )
    assert b.data.tolist() == [1e100, -1e50]


@pytest.mark.parametrize(
    ("example", "field", "needle"),
    [
        ({"features": {"a": 1}, "lable": 1}, "lable", "unknown key"),
        ({"features": {"a": 1}}, "label", "missing"),
        ({"features": {"a": 1}, "label": 2}, "label", "not one of the classes"),
        ({"features": {"a": 1}, "label": [1]}, "label", "not one of the classes"),
        ({"features": "a=1", "label": 1}, "features", "object or a list"),
        ({"text": 5, "label": 1}, "text", "string"),
        ({"text": "x" * 101, "label": 1}, "text", "max_text_chars"),
        ({"features": {f"f{i}": 1.0 for i in range(11)}, "label": 1}, "features", "max_features"),
        ({"features": {"a": 1}, "label": 1, "id": 1.5}, "id", "string or an integer"),
    ],
)
def test_structural_errors(example: dict[str, Any], field: str, needle: str) -> None:
    f = Featurizer(Spec(text=Text()), max_features=10, max_text_chars=100)
    with pytest.raises(InvalidExample, match=needle) as e:
        f.transform([{"features": {"ok": 1.0}, "label": -1}, example])
    assert e.value.field == field and e.value.index == 1


def test_text_is_rejected_when_the_model_has_no_text_featurizer() -> None:
    with pytest.raises(InvalidExample, match="no text") as e:
        Featurizer(Spec()).transform([{"text": "hello", "label": 1}])
    assert e.value.field == "text"


def test_the_first_bad_example_is_reported_whatever_the_kinds_of_errors() -> None:
    f = Featurizer(Spec())
    examples: list[Any] = [
        {"features": {"a": 1.0}, "label": 1},
        {"features": {"a": math.nan}, "label": 1},  # value error: found after the loop
        {"features": {"a": 1.0}, "label": 7},
        {"features": {"a": 1.0}, "oops": 1},  # structural error: found in the loop
    ]
    with pytest.raises(InvalidExample) as e:
        f.transform(examples)
    assert e.value.index == 1 and e.value.field == "features.a"
    with pytest.raises(InvalidExample) as e:
        f.transform([examples[0], examples[2], examples[1]])
    assert e.value.index == 1 and e.value.field == "label"
    with pytest.raises(InvalidExample) as e:
        f.transform([examples[0], examples[3], examples[1]])
    assert e.value.index == 1 and e.value.field == "oops"


def test_prediction_requests_ignore_labels() -> None:
    b = Featurizer(Spec()).transform([{"features": {"a": 1.0}}], labels=False)
    assert b.y.tolist() == [-1]


# --- labels -----------------------------------------------------------------------------------


def test_default_binary_labels_accept_the_documented_aliases() -> None:
    lab = Labels((-1, 1), 1)
    for v in (-1, 0, False, "-1", "0", -1.0):
        assert lab.index(v) == 0
    for v in (1, True, "1", "+1", 1.0):
        assert lab.index(v) == 1
    for v in (2, "yes", None, 0.5, "true"):
        with pytest.raises(ValueError, match="not one of the classes"):
            lab.index(v)
    assert (lab.name(0), lab.name(1)) == (-1, 1)


def test_declared_classes_and_the_positive_class() -> None:
    lab = Labels(("ham", "spam"), None)
    assert lab.index("spam") == 1 and lab.name(0) == "ham"
    flipped = Labels(("spam", "ham"), "spam")
    assert flipped.index("spam") == 1 and flipped.index("ham") == 0
    with pytest.raises(ValueError):
        lab.index(1)
    ints = Labels((0, 1), 1)
    with pytest.raises(ValueError):
        ints.index(True)  # a bool is not the class 1 when classes are declared
    multi = Labels(("a", "b", "c"), None)
    assert [multi.index(c) for c in "abc"] == [0, 1, 2] and multi.n_classes == 3


def test_featurizer_maps_labels_through_the_spec() -> None:
    f = Featurizer(Spec(classes=("ham", "spam"), positive="ham"))
    b = f.transform([{"features": {}, "label": "ham"}, {"features": {}, "label": "spam"}])
    assert b.y.tolist() == [1, 0]
    assert f.label_name(1) == "ham" and f.label_index("spam") == 0


# --- text ---------------------------------------------------------------------------------------


def test_text_words_are_hashed_with_their_prefix() -> None:
    f = Featurizer(Spec(dim=2**18, text=Text(binary=False)))
    a = f.transform([{"text": "Free FREE money!", "label": 1}])
    b = Featurizer(Spec(dim=2**18)).transform(
        [{"features": {"w:free": 2.0, "w:money": 1.0}, "label": 1}]
    )
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.data, b.data)


def test_text_binary_and_l2_normalised() -> None:
    spec = Spec(dim=2**18, text=Text(char_ngrams=(4, 4), binary=True, normalize=True))
    b = Featurizer(spec).transform(
        [{"text": "buy buy cheap pills now now now", "label": 1}, {"text": "", "label": 0}]
    )
    row = b.data[b.indptr[0] : b.indptr[1]]
    assert math.isclose(float(np.sum(row**2)), 1.0, rel_tol=1e-9)
    assert b.indptr[2] == b.indptr[1]  # empty text, empty row
    # binary: every distinct token weighs the same (collisions aside) before normalising
    assert np.allclose(np.abs(row), np.abs(row).max()) or len(set(np.abs(row).round(12))) <= 3


def test_text_and_named_features_share_a_row_and_normalize_scales_the_whole_row() -> None:
    spec = Spec(dim=2**18, text=Text(), normalize=True)
    b = Featurizer(spec).transform([{"features": {"x": 3.0}, "text": "hello", "label": 1}])
    assert b.nnz == 2
    assert math.isclose(float(np.sum(b.data**2)), 1.0)


# --- quadratic ----------------------------------------------------------------------------------


def test_quadratic_pairs_cross_two_groups() -> None:
    spec = Spec(dim=2**20, quadratic=(("u", "i"),))
    f = Featurizer(spec)
    ex = {"features": {"u:alice": 2.0, "u:age": 3.0, "i:book": 5.0, "other": 1.0}, "label": 1}
    b = f.transform([ex])
    assert b.nnz == 4 + 2  # four linear features, two crosses
    lin = Featurizer(Spec(dim=2**20)).transform([ex])
    extra = sorted(set(np.abs(b.data).tolist()) - set(np.abs(lin.data).tolist()))
    assert extra == [10.0, 15.0]
    reordered = {"features": dict(reversed(list(ex["features"].items()))), "label": 1}
    b2 = f.transform([reordered])
    np.testing.assert_array_equal(b.indices, b2.indices)
    np.testing.assert_array_equal(b.data, b2.data)


def test_quadratic_within_one_group_takes_each_unordered_pair_once() -> None:
    f = Featurizer(Spec(dim=2**20, quadratic=(("a", "a"),)))
    b = f.transform([{"features": {"a:x": 2.0, "a:y": 3.0, "a:z": 5.0}, "label": 1}])
    assert b.nnz == 3 + 3
    # per-row crosses: rows do not leak into each other
    two = f.transform(
        [
            {"features": {"a:x": 2.0, "a:y": 3.0}, "label": 1},
            {"features": {"a:z": 5.0}, "label": 1},
        ]
    )
    assert np.diff(two.indptr).tolist() == [3, 1]


def test_featurizer_validates_its_own_arguments() -> None:
    # the spec's own rules (dim, hashing, classes, transform) are ModelSpec.from_dict's
    with pytest.raises(ValueError, match="max_features"):
        Featurizer(Spec(), max_features=0)


def test_log1p_transform_applies_to_named_and_dense_values_only() -> None:
    @dataclass(frozen=True)
    class LogSpec(Spec):
        transform: str = "log1p"

    f = Featurizer(LogSpec(dim=4, hashing=False))
    b = f.transform(
        [{"features": {"0": 9.0, "1": -99.0}, "label": 1}, {"features": [0, 0, 0, 3], "label": 0}]
    )
    expected = [math.log(10.0), -math.log(100.0), math.log(4.0)]
    np.testing.assert_allclose(b.data, expected)
    text = Featurizer(LogSpec(dim=2**10, text=Text(binary=False)))
    assert text.transform([{"text": "a a a", "label": 1}]).data.tolist() in ([3.0], [-3.0])


@pytest.mark.parametrize("normalize", [False, True])
def test_one_schema_fast_path_equals_the_general_path(normalize: bool) -> None:
    """A batch whose examples share one schema takes a cached-layout path; collisions (3
    bits for 12 names), zeros and signs must come out as in the general assembly."""
    sklearn = pytest.importorskip("sklearn.feature_extraction")
    rng = random.Random(9)
    names = [f"n{i}" for i in range(12)]
    examples = [
        {"features": {k: rng.choice([0.0, 0.0, rng.uniform(-3, 3)]) for k in names}, "label": 1}
        for _ in range(40)
    ]
    f = Featurizer(Spec(dim=8, normalize=normalize))
    fast = f.transform(examples)
    check_csr(fast, 8)
    mixed = f.transform([*examples, {"features": {"other": 1.0}, "label": 1}])  # general path
    np.testing.assert_array_equal(fast.indptr, mixed.indptr[:-1])
    np.testing.assert_array_equal(fast.indices, mixed.indices[: fast.nnz])
    np.testing.assert_allclose(fast.data, mixed.data[: fast.nnz], rtol=1e-12, atol=1e-15)
    hasher = sklearn.FeatureHasher(n_features=8, input_type="dict", alternate_sign=True)
    expected = hasher.transform([e["features"] for e in examples]).toarray()
    if normalize:
        norms = np.linalg.norm(expected, axis=1, keepdims=True)
        expected = np.divide(expected, norms, out=np.zeros_like(expected), where=norms > 0)
    np.testing.assert_allclose(dense(fast, 8), expected, atol=1e-12)
    assert not np.any(fast.data == 0.0)


def test_a_bad_name_after_a_dense_row_names_its_own_index() -> None:
    """Dense rows and named rows mixed in one batch: the error points at the named row."""
    spec = ModelSpec.from_dict({"algorithm": "pa1", "hashing": False, "dim": 3})
    featurizer = spec.featurizer()
    good = featurizer.transform(
        [{"features": [1, 0, 0], "label": 1}, {"features": {"2": 5.0}, "label": 1}]
    )
    assert good.indptr.tolist() == [0, 1, 2]
    assert good.indices.tolist() == [0, 2]
    with pytest.raises(InvalidExample) as info:
        featurizer.transform(
            [{"features": [1, 2, 3], "label": 1}, {"features": {"7": 1.0}, "label": 1}]
        )
    assert info.value.index == 1
    assert info.value.field == "features.7"


@pytest.mark.parametrize("n", [0, 1, 2, 24, 25, 97, 1000])
@pytest.mark.parametrize("bits", [1, 4, 20, 28, 40])
def test_the_row_sort_is_a_stable_sort_by_column(n: int, bits: int) -> None:
    from service.learning.batch import _stable_order

    rng = np.random.default_rng(n * 100 + bits)
    c = np.concatenate([[7, 7], rng.integers(0, 2**bits, n)]).astype(np.int64)
    got = _stable_order(c, 2, 2 + n)
    np.testing.assert_array_equal(got, np.argsort(c[2:], kind="stable"))
