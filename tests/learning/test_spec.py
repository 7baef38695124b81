"""Model specs: canonical round trips, presets, and an InvalidSpec naming the field for
every kind of bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.errors import InvalidSpec
from service.learning.spec import PRESETS, ModelSpec, TextSpec

GOOD: list[dict[str, Any]] = [
    {"algorithm": "perceptron"},
    {"algorithm": "pa1", "params": {"C": 0.25}, "bits": 12},
    {"algorithm": "pa2", "hashing": False, "dim": 57, "classes": ["ham", "spam"]},
    {"algorithm": "pa", "classes": ["spam", "ham"], "positive": "spam", "normalize": True},
    {"algorithm": "perceptron", "dim": 1024},
    {
        "algorithm": "pa1",
        "text": {"word_ngrams": [1, 2], "char_ngrams": None, "binary": False},
        "quadratic": [["u", "i"]],
    },
    {"preset": "spam"},
    {"classes": ["ham", "spam"]},
    {"preset": "spam", "params": {"lr": 0.2}},
    {"algorithm": "pa1", "transform": "log1p", "hashing": False, "dim": 10},
]


@pytest.mark.parametrize("d", GOOD)
def test_to_dict_is_canonical_and_json_safe(d: dict[str, Any]) -> None:
    spec = ModelSpec.from_dict(d)
    out = spec.to_dict()
    assert json.loads(json.dumps(out)) == out
    again = ModelSpec.from_dict(json.loads(json.dumps(out)))
    assert again == spec
    assert again.to_dict() == out


def test_defaults() -> None:
    s = ModelSpec.from_dict({"algorithm": "pa1"})
    assert (s.bits, s.dim, s.hashing) == (18, 2**18, True)
    assert (s.classes, s.positive, s.n_classes, s.multiclass) == ((-1, 1), 1, 2, False)
    assert s.params == {"C": 1.0}  # defaults filled in: the canonical form
    assert s.text == TextSpec() and s.quadratic == () and s.normalize is False
    assert s.preset is None


def test_dim_with_hashing_gives_the_bits() -> None:
    assert ModelSpec.from_dict({"algorithm": "pa1", "dim": 1024}).bits == 10
    assert ModelSpec.from_dict({"algorithm": "pa1", "bits": 10, "dim": 1024}).dim == 1024


def test_presets_fill_what_the_client_left_out() -> None:
    spam = ModelSpec.from_dict({"classes": ["ham", "spam"]})
    assert spam.preset == "spam" and spam.text is not None
    assert spam.algorithm == PRESETS["spam"]["algorithm"]
    assert spam.positive == "spam"
    assert ModelSpec.from_dict({"preset": "spam"}).classes == ("ham", "spam")
    assert ModelSpec.from_dict({}).preset == "spam"
    assert ModelSpec.from_dict({"classes": ["a", "b", "c"]}).preset == "text"
    tuned = ModelSpec.from_dict({"preset": "spam", "bits": 12, "text": False})
    assert tuned.bits == 12 and tuned.text is None
    other = ModelSpec.from_dict({"preset": "spam", "algorithm": "perceptron"})
    assert other.params == {} and other.text == spam.text


def test_preset_params_merge_when_the_algorithm_is_kept() -> None:
    base = ModelSpec.from_dict({"preset": "spam"})
    first = next(iter(base.params))
    value = base.params[first]
    changed = ModelSpec.from_dict({"preset": "spam", "params": {first: value * 2}})
    assert changed.params[first] == value * 2
    assert set(changed.params) == set(base.params)


def test_build_learner_and_featurizer() -> None:
    spec = ModelSpec.from_dict({"classes": ["ham", "spam"]})
    learner = spec.build_learner()
    assert learner.dim == spec.dim and learner.n_classes == 2
    f = spec.featurizer(max_features=1000)
    batch = f.transform([{"text": "cheap pills", "label": "spam"}])
    assert batch.y.tolist() == [1] and batch.nnz > 0
    assert learner.learn(batch).shape == (1,)


@pytest.mark.parametrize(
    ("d", "field"),
    [
        ([1, 2], None),
        ({"algorithm": "pa1", "lr": 1}, "lr"),
        ({"algorithm": "nope"}, "algorithm"),
        ({"algorithm": 3}, "algorithm"),
        ({"algorithm": "pa1", "params": {"C": 0}}, "params.C"),
        ({"algorithm": "pa1", "params": {"gamma": 1}}, "params.gamma"),
        ({"algorithm": "pa1", "params": {"C": [1]}}, "params.C"),
        ({"algorithm": "pa1", "params": [1]}, "params"),
        ({"algorithm": "pa1", "bits": 0}, "bits"),
        ({"algorithm": "pa1", "bits": 29}, "bits"),
        ({"algorithm": "pa1", "bits": "18"}, "bits"),
        ({"algorithm": "pa1", "bits": 10, "dim": 1000}, "dim"),
        ({"algorithm": "pa1", "dim": 1000}, "dim"),
        ({"algorithm": "pa1", "hashing": False}, "dim"),
        ({"algorithm": "pa1", "hashing": False, "dim": 0}, "dim"),
        ({"algorithm": "pa1", "hashing": False, "dim": 10, "bits": 3}, "bits"),
        ({"algorithm": "pa1", "hashing": "no"}, "hashing"),
        ({"algorithm": "pa1", "classes": ["a"]}, "classes"),
        ({"algorithm": "pa1", "classes": ["a", "a"]}, "classes"),
        ({"algorithm": "pa1", "classes": [True, False]}, "classes"),
        ({"algorithm": "pa1", "classes": [1.5, 2.5]}, "classes"),
        ({"algorithm": "pa1", "classes": "ab"}, "classes"),
        ({"algorithm": "pa1", "classes": ["a", "b"], "positive": "c"}, "positive"),
        ({"algorithm": "perceptron", "classes": ["a", "b", "c"], "positive": "a"}, "positive"),
        ({"algorithm": "pa1", "text": {"word_ngrams": [2, 1]}}, "text.word_ngrams"),
        ({"algorithm": "pa1", "text": {"char_ngrams": [0, 4]}}, "text.char_ngrams"),
        ({"algorithm": "pa1", "text": {"char_ngrams": "4"}}, "text.char_ngrams"),
        ({"algorithm": "pa1", "text": {"stem": True}}, "text.stem"),
        ({"algorithm": "pa1", "text": {"word_ngrams": None}}, "text"),
        ({"algorithm": "pa1", "text": {"binary": 1}}, "text.binary"),
        ({"algorithm": "pa1", "text": "words"}, "text"),
        ({"algorithm": "pa1", "hashing": False, "dim": 8, "text": {}}, "text"),
        ({"algorithm": "pa1", "quadratic": [["a"]]}, "quadratic"),
        ({"algorithm": "pa1", "quadratic": [["a:b", "c"]]}, "quadratic"),
        ({"algorithm": "pa1", "normalize": "yes"}, "normalize"),
        ({"preset": "ham"}, "preset"),
        ({"algorithm": "pa1", "transform": "log"}, "transform"),
    ],
)
def test_invalid_specs_name_the_field(d: Any, field: str | None) -> None:
    with pytest.raises(InvalidSpec) as e:
        ModelSpec.from_dict(d)
    assert e.value.field == field
    assert e.value.message


def test_text_spec_defaults() -> None:
    t = TextSpec.from_dict({})
    assert (t.word_ngrams, t.char_ngrams, t.binary, t.normalize) == ((1, 1), None, True, True)


def test_every_hashing_model_has_the_default_text_featurizer_unless_told_otherwise() -> None:
    plain = ModelSpec.from_dict({"algorithm": "pa1"})
    assert plain.text == TextSpec()  # binary word unigrams, L2-normalised
    assert ModelSpec.from_dict({"algorithm": "pa1", "text": None}).text == TextSpec()
    off = ModelSpec.from_dict({"algorithm": "pa1", "text": False})
    assert off.text is None and off.to_dict()["text"] is False
    assert ModelSpec.from_dict(off.to_dict()) == off
    assert ModelSpec.from_dict(plain.to_dict()) == plain
    dense = ModelSpec.from_dict({"algorithm": "pa1", "hashing": False, "dim": 4})
    assert dense.text is None and dense.to_dict()["text"] is None
    x = plain.featurizer().transform([{"text": "win money now", "label": 1}])
    assert x.n == 1 and x.nnz == 3
    with pytest.raises(InvalidSpec, match="text must be an object"):
        ModelSpec.from_dict({"algorithm": "pa1", "text": "words"})


def test_the_spam_preset_declares_ham_and_spam() -> None:
    for d in ({"preset": "spam"}, {}, {"preset": "spam", "algorithm": "pa1"}):
        s = ModelSpec.from_dict(d)
        assert (s.classes, s.positive) == (("ham", "spam"), "spam"), d
    assert ModelSpec.from_dict({"preset": "spam", "classes": [0, 1]}).classes == (0, 1)
    assert ModelSpec.from_dict({"algorithm": "pa1"}).classes == (-1, 1)
    assert ModelSpec.from_dict({"preset": "text", "classes": ["a", "b", "c"]}).n_classes == 3


@pytest.mark.parametrize("preset", [["spam"], {"a": 1}, 3])
def test_a_preset_that_is_not_a_name_is_invalid_spec(preset: Any) -> None:
    with pytest.raises(InvalidSpec, match="unknown preset"):
        ModelSpec.from_dict({"preset": preset})


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"C": "1"}, ["must be a number", "'1'"]),
        ({"C": "1e-3"}, ["must be a number"]),
        ({"C": 1e-320}, ["C must be in [1e-12, 1e+12]", "1e-320"]),  # subnormal
        ({"C": 1e308}, ["C must be in [1e-12, 1e+12]"]),
        ({"C": 5e-13}, ["C must be in [1e-12, 1e+12]"]),
    ],
)
def test_hyper_parameters_are_typed_and_in_range(params: dict[str, Any], words: list[str]) -> None:
    """A spec (the API's JSON, a stored spec) takes numbers as numbers: a string is refused, not
    converted, and values out of the sane range are refused with the range named."""
    with pytest.raises(InvalidSpec) as info:
        ModelSpec.from_dict({"algorithm": "pa1", "params": params})
    assert info.value.field == "params.C"
    for w in words:
        assert w in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("algorithm", "params", "field"),
    [
        ("pegasos", {"projection": "true"}, "params.projection"),
        ("logistic", {"l2": 1e-300}, "params.l2"),
        ("logistic", {"lr": float("1e400")}, "params.lr"),
    ],
)
def test_other_parameters_are_strict_too(
    algorithm: str, params: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidSpec) as info:
        ModelSpec.from_dict({"algorithm": algorithm, "params": params})
    assert info.value.field == field


def test_sane_values_at_the_edges_are_taken() -> None:
    assert ModelSpec.from_dict({"algorithm": "pa1", "params": {"C": 1e-12}}).params["C"] == 1e-12
    assert ModelSpec.from_dict({"algorithm": "pa1", "params": {"C": 10**12}}).params["C"] == 1e12
    assert ModelSpec.from_dict({"algorithm": "logistic", "params": {"l2": 0}}).params["l2"] == 0


# ----------------------------------------------------------------------------------------------
# the presets themselves: valid, canonical, and better than a trivial baseline on shipped data
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "classes"), [("spam", ["ham", "spam"]), ("text", ["a", "b", "c"])]
)
def test_each_preset_is_a_valid_canonical_spec(name: str, classes: list[str]) -> None:
    spec = ModelSpec.from_dict({"preset": name, "classes": classes})
    assert spec.preset == name and spec.algorithm == PRESETS[name]["algorithm"]
    assert spec.to_dict()["text"] == TextSpec.from_dict(PRESETS[name]["text"]).to_dict()
    assert ModelSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    learner = spec.build_learner()
    mail = "From: a@example.com\nSubject: WIN cash\n\nCall 0800 123 now for your £100 prize!"
    batch = spec.featurizer().transform(
        [{"text": mail, "label": classes[-1]}, {"text": "see you at lunch", "label": classes[0]}]
    )
    assert batch.n == 2 and batch.nnz > 0
    assert learner.learn(batch).shape == (2,)


def _textgen() -> Any:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "textgen.py"
    spec = importlib.util.spec_from_file_location("textgen", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_spam_preset_beats_trivial_baselines_on_the_shipped_text_stream(tmp_path: Any) -> None:
    from service.cli.evaluate import evaluate_file

    examples = list(_textgen().SpamStream(seed=3).examples(4000))
    path = tmp_path / "text.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in examples))
    spam = evaluate_file(path, preset="spam", classes=["ham", "spam"])
    n_spam = sum(e["label"] == "spam" for e in examples)
    majority = min(n_spam, len(examples) - n_spam)  # always predicting the larger class
    assert spam.examples == len(examples)
    assert spam.mistakes < majority / 3
    assert spam.auc is not None and spam.auc > 0.95
    perceptron = evaluate_file(path, algorithm="perceptron", classes=["ham", "spam"],
                               text=PRESETS["spam"]["text"])  # fmt: skip
    assert spam.mistakes < perceptron.mistakes  # the same features, a plain learner


def test_the_text_preset_beats_the_majority_class_on_a_multiclass_text_stream(
    tmp_path: Any,
) -> None:
    import random

    from service.cli.evaluate import evaluate_file

    rng = random.Random(0)
    noise = [f"w{i}" for i in range(300)]
    topics = {t: [f"{t}{i}" for i in range(40)] for t in ("sport", "money", "music")}
    lines = []
    for i in range(3000):
        topic = rng.choice(list(topics))
        words = rng.sample(noise, 8) + rng.sample(topics[topic], 2)
        rng.shuffle(words)
        lines.append(json.dumps({"id": str(i), "text": " ".join(words), "label": topic}))
    path = tmp_path / "topics.jsonl"
    path.write_text("\n".join(lines) + "\n")
    text = evaluate_file(path, preset="text", classes=list(topics))
    counts = [sum(f'"label": "{t}"' in line for line in lines) for t in topics]
    assert text.examples == 3000
    assert text.mistakes < (3000 - max(counts)) / 4
