"""Memory a client cannot grow: the featurizer's caches are bounded by bytes, and feature names
and text tokens by length, with an invalid example (a 422 over HTTP) beyond the limits."""

from __future__ import annotations

import gc
import math
import tracemalloc

import pytest

from service.errors import InvalidExample
from service.learning.features import CACHE_BYTES, MAX_NAME_CHARS, MAX_TOKEN_CHARS, Featurizer
from service.learning.spec import ModelSpec
from service.learning.values import FIELD_NAME_CHARS, MAX_ABS_VALUE, MAX_FEATURES

SPEC = ModelSpec.from_dict(
    {"algorithm": "pa1", "bits": 16, "text": {"char_ngrams": [4, 4]}, "quadratic": [["a", "b"]]}
)


def test_the_documented_defaults() -> None:
    f = Featurizer(SPEC)
    assert (f.cache_bytes, f.max_name_chars, f.max_token_chars) == (
        CACHE_BYTES,
        MAX_NAME_CHARS,
        MAX_TOKEN_CHARS,
    )
    with pytest.raises(ValueError, match="max_token_chars"):
        Featurizer(SPEC, max_token_chars=0)
    with pytest.raises(ValueError, match="cache_bytes"):
        Featurizer(SPEC, cache_bytes=-1)


def test_max_features_is_bounded_so_a_squared_norm_stays_finite() -> None:
    assert math.isfinite(MAX_FEATURES * MAX_ABS_VALUE**2)
    assert Featurizer(SPEC, max_features=MAX_FEATURES).max_features == MAX_FEATURES
    with pytest.raises(ValueError, match="max_features"):
        Featurizer(SPEC, max_features=MAX_FEATURES + 1)


def test_a_feature_name_over_the_limit_is_invalid_and_the_field_is_cut() -> None:
    f = Featurizer(SPEC, max_name_chars=100)
    assert f.transform([{"features": {"x" * 100: 1.0}, "label": 1}]).nnz == 1
    long = "y" * 1_000_000
    with pytest.raises(InvalidExample, match="max_name_chars=100") as e:
        f.transform([{"features": {"ok": 1.0}, "label": 1}, {"features": {long: 1}, "label": 1}])
    assert e.value.index == 1
    assert e.value.field == "features." + "y" * FIELD_NAME_CHARS + "…"
    assert len(e.value.message) < 200  # the name is not echoed
    assert f.cached_bytes < 10_000  # and nothing of it was kept


@pytest.mark.parametrize("compiled", [True, False])
def test_a_word_over_the_limit_is_invalid(compiled: bool) -> None:
    f = Featurizer(SPEC, max_token_chars=50, compiled_text=compiled)
    ok = "é" * 50  # characters, not bytes
    assert f.transform([{"text": f"a {ok} b", "label": 1}]).nnz > 0
    for text in (f"a {ok}x b", "Ä" * 51, "z" * 1_000_000):
        with pytest.raises(InvalidExample, match="max_token_chars=50") as e:
            f.transform([{"text": "fine", "label": 1}, {"text": text, "label": -1}])
        assert (e.value.field, e.value.index) == ("text", 1)


def test_an_earlier_bad_example_still_wins_over_a_long_word() -> None:
    f = Featurizer(SPEC, max_token_chars=10)
    with pytest.raises(InvalidExample) as e:
        f.transform([{"text": "ok", "label": 5}, {"text": "w" * 11, "label": 1}])
    assert (e.value.field, e.value.index) == ("label", 0)


def test_the_caches_never_hold_more_than_their_bound() -> None:
    bound = 1 << 20
    f = Featurizer(SPEC, cache_bytes=bound)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for k in range(300):  # 300 batches of distinct 1,000-character names: ~30 MB of names
            names = [f"a:{k}-{j}-" + "n" * 1000 for j in range(10)]
            names += [f"b:{k}-{j}" for j in range(10)]
            examples = [
                {"features": dict.fromkeys(names[i::10], 1.0), "text": f"FREE {k}", "label": 1}
                for i in range(10)
            ]
            f.transform(examples)
            assert f.cached_bytes <= bound
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 3 * bound, held  # the charged bytes are what is really held, within slack


def test_bounded_caches_give_the_same_answers() -> None:
    examples = [
        {"features": {f"a:{i % 37}": 1.0, f"b:{i % 11}-" + "x" * 300: 2.0}, "label": 1}
        for i in range(400)
    ]
    big = Featurizer(SPEC).transform(examples)
    small = Featurizer(SPEC, cache_bytes=4096).transform(examples)
    assert big.indices.tolist() == small.indices.tolist()
    assert big.data.tobytes() == small.data.tobytes()
