"""The compiled JSON reader is a shortcut, never a judge: whatever body it accepts gives the
batch and ids that orjson + the featurizer give, to the bit; everything else it leaves to them."""

from __future__ import annotations

import random
import zlib
from typing import Any

import numpy as np
import orjson
import pytest

from service.errors import StreamlearnError
from service.learning.features import Featurizer
from service.learning.jsonpath import featurize_json
from service.learning.spec import ModelSpec

NUMBERS = [
    "0", "-0", "1", "-7", "3.5", "0.1", "-0.000123", "1e3", "2E-5", "1.5e+2", "0.30000000000000004",
    "0.14285714285714285", "123456789012345678", "9007199254740993", "12345678901234567890",
    "1e22", "1e23", "4.9e-324", "1.7976931348623157e308", "1e400", "1e101", "-1e100",
    "123.456e-7", "00", "1.", ".5", "+1", "0x10", "true", "null", '"3"', "[1]",
]  # fmt: skip
NAMES = ["a", "b", "f1", "f2", "café", "😀", "x y", "w:hi", "", "a\\u0041", 'q\\"', "n" * 40]
TEXTS = ["hello world", "Win £100 now!!! http://bit.ly/x", "", "café déjà 😀", "line\\nbreak",
         "tab\\t and \\u00e9", "\\ud800 lone"]  # fmt: skip
PLAIN = [f"g{j}" for j in range(60)]
LABELS = ["1", "-1", "0", '"1"', "true", "2", "1.0", '"spam"', "null"]


def body(rng: random.Random, common: list[str]) -> bytes:
    """A body as text, mostly valid, sometimes not (every piece is drawn from lists that mix
    the plain and the odd)."""
    examples = []
    for _ in range(rng.randint(1, 6)):
        members = []
        if rng.random() < 0.8:
            k = rng.choice([0, 1, 2, 3, 5, 40])
            pool = PLAIN if rng.random() < 0.7 else PLAIN[:30] + NAMES
            names = rng.sample(pool, k) + ([rng.choice(pool)] if rng.random() < 0.05 else [])
            pairs = [
                f'"{name}": {rng.choice(NUMBERS) if rng.random() < 0.1 else rng.choice(NUMBERS[:9])}'
                for name in names
            ]
            members.append('"features": {' + ", ".join(pairs) + "}")
        if rng.random() < 0.4:
            members.append(f'"text": "{rng.choice(TEXTS)}"')
        if rng.random() < 0.9:
            members.append(
                f'"label": {rng.choice(LABELS) if rng.random() < 0.3 else rng.choice(common)}'
            )
        if rng.random() < 0.3:
            members.append(f'"id": "{rng.choice(["a", "b", "id-7", "", "x" * 300])}"')
        if rng.random() < 0.05:
            members.append('"meta": {"k": [1, 2]}')
        if rng.random() < 0.03:
            members.append('"lable": 1')
        rng.shuffle(members)
        sep = rng.choice([", ", ",", " ,\n "])
        examples.append("{" + sep.join(members) + "}")
    inner = "[" + ", ".join(examples) + "]"
    text = rng.choice(
        ['{"examples": %s}', "%s", ' { "examples" :%s } ', '{"examples": %s, "x": 1}']
    )
    out = text % inner
    if rng.random() < 0.03:
        out = out[: rng.randint(0, len(out))]  # truncated
    return out.encode()


def general(f: Featurizer, raw: bytes, labels: bool) -> Any:
    """What the general path gives: (batch, ids), or the error it raises."""
    try:
        doc = orjson.loads(raw)
        items = doc["examples"] if isinstance(doc, dict) and set(doc) == {"examples"} else doc
        if not isinstance(items, list) or not items:
            return "shape"
        ids = [e.get("id") for e in items]
        if any(i is not None and not (isinstance(i, str) and 0 < len(i) <= 256) for i in ids):
            return "id"
        return f.transform(items, labels=labels), ids
    except (orjson.JSONDecodeError, StreamlearnError, AttributeError, TypeError) as e:
        return e


SPECS = [
    {"algorithm": "pa1", "bits": 12, "text": {}, "classes": [-1, 1]},
    {"algorithm": "pa1", "bits": 4, "normalize": True},  # collisions, normalised rows
    {"algorithm": "perceptron", "bits": 10, "transform": "log1p", "classes": ["0", "1"]},
]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("labels", [True, False])
def test_what_the_reader_accepts_is_what_the_general_path_gives(
    spec: dict[str, Any], labels: bool
) -> None:
    f = Featurizer(ModelSpec.from_dict(spec), max_features=30, max_text_chars=40)
    rng = random.Random(zlib.crc32(f"{spec}{labels}".encode()))
    taken = 0
    for _ in range(1500):
        raw = body(rng, ['"1"', '"0"'] if "classes" in spec else ["1", "-1", "0"])
        fast = featurize_json(f, raw, labels=labels, max_batch=6)
        if fast is None:
            continue
        taken += 1
        want = general(f, raw, labels)
        assert isinstance(want, tuple), (raw, want)
        (b, ids), (g, gids) = fast, want
        assert ids == gids, raw
        for a in ("indptr", "indices", "data", "y"):
            x, w = getattr(b, a), getattr(g, a)
            assert x.dtype == w.dtype and np.array_equal(x.view(np.uint8), w.view(np.uint8)), (
                raw,
                a,
            )
    assert taken > 50  # the plain bodies do take the shortcut


def test_one_schema_batches_and_escaped_texts_take_the_shortcut() -> None:
    f = Featurizer(ModelSpec.from_dict({"algorithm": "pa1", "bits": 8, "normalize": True}))
    rows = [{"features": {"a": i + 0.5, "b": -i, "c": 1e-3 * i}, "label": 1} for i in range(50)]
    raw = orjson.dumps(rows)
    fast = featurize_json(f, raw, labels=True, max_batch=100)
    assert fast is not None
    g = f.transform(rows)
    assert np.array_equal(fast[0].data, g.data) and np.array_equal(fast[0].indices, g.indices)
    t = Featurizer(ModelSpec.from_dict({"algorithm": "pa1", "bits": 12, "text": {}}))
    texts = [{"text": 'say "hi"\n\tthere é', "label": -1}, {"text": "plain", "label": 1}]
    got = featurize_json(t, orjson.dumps({"examples": texts}), labels=True, max_batch=10)
    assert got is not None
    assert np.array_equal(got[0].indices, t.transform(texts).indices)


def test_numbers_convert_as_python_float_does() -> None:
    """Every number the reader converts itself is the double ``float`` gives (correctly
    rounded): short and 17- to 18-digit mantissas, tiny and large exponents, ties."""
    from service.learning._jsonscan import _POW5, _POW10, _number

    rng = random.Random(7)
    texts = [repr(rng.random() * 10 ** rng.randint(-30, 30)) for _ in range(20000)]
    texts += [f"{rng.randint(0, 10**18 - 1)}e-{rng.randint(0, 30)}" for _ in range(20000)]
    texts += [f"0.{rng.randint(0, 10**17):017d}" for _ in range(20000)]
    texts += ["9007199254740993.0", "0.1e-25", "123456789012345678e-25", "-2.5e-3", "5e-324"]
    converted = 0
    for t in texts:
        raw = np.frombuffer(t.encode(), dtype=np.uint8)
        end, value, kind = _number(raw, 0, raw.shape[0], _POW10, _POW5)
        assert end == len(t) and kind >= 0, t
        if kind == 0:
            converted += 1
            assert value == float(t) and str(value) == str(float(t)), t
    assert converted > 0.75 * len(texts)  # the rest: Python's float, in featurize_json


def test_bodies_it_does_not_handle_are_left_to_the_general_path() -> None:
    f = Featurizer(ModelSpec.from_dict({"algorithm": "pa1", "bits": 8, "text": {}}))
    plain = b'{"examples": [{"features": {"a": 1}, "label": 1}]}'
    assert featurize_json(f, plain, labels=True, max_batch=10) is not None
    for raw in (
        plain.replace(b'"a"', b'"\xff"'),  # not UTF-8: orjson refuses it
        plain.replace(b'"a": 1', b'"a": 1, "a": 2'),  # a repeated name: JSON keeps the last
        plain.replace(b'"label": 1', b'"label": 1, "meta": {}'),
        plain.replace(b'"label": 1', b'"label": true'),
        plain.replace(b"1}]", b"1},]"),  # a trailing comma
        b'{"features": {"a": 1}, "label": 1}',  # one example: answered as one
    ):
        assert featurize_json(f, raw, labels=True, max_batch=10) is None, raw
    assert featurize_json(f, plain, labels=True, max_batch=0) is None  # over max_batch
