"""The compiled text path is bit-identical to the Python reference: same hashes of the same
``w:``/``c:`` names, same values, same CSR to the last bit (hash collisions summed in the same
order), on Unicode, emoji, URLs, mixed case, empty strings and random text."""

from __future__ import annotations

import random
import re
from typing import Any

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.learning._textkernel import _murmur3, lowered_utf8, text_grams, word_table
from service.learning.batch import Batch
from service.learning.features import Featurizer
from service.learning.spec import ModelSpec
from service.learning.text import TextFeaturizer

CORPUS = [
    "",
    " ",
    "\n\t  \r\n",
    "!!! ... ???",
    "Buy now!",
    "FREE entry in 2 a wkly comp to win FA Cup final tkts 21st May 2005. Text FA to 87121",
    "Visit https://www.Example.com/path?q=1&r=%20x or WWW.SHOP.co.uk/deal — now!",
    "mail me: John.Smith+spam@Example.ORG",
    "Ünïcödé ÇA VA? Straße GROSS ß ẞ İstanbul ı I",
    "ΣΊΣΥΦΟΣ σοφός ΟΔΟΣ. ΑΣ Σ",  # final sigma, upper and lower
    "😀😃 emoji 👍🏽 family 👨‍👩‍👧 flags 🇬🇧🇫🇷 and text",
    "日本語のテキスト、中文文本，한국어 텍스트",
    "مرحبا بالعالم שלום עולם",
    "combining: e\u0301 a\u0308 n\u0303 — zero\u200bwidth\u200djoiner",
    "ﬁne ﬂour ǅ ǈ Ǌ ǲ ᾈ ᾼ",  # ligatures and titlecase digraphs
    "tabs\tand\nnewlines\rand\x0bvertical\x0cform",
    "nul\x00inside\x00text",
    "a" * 300,
    "£100 $5.99 €20 ¥1000 ₹50 100USD",
    "under_score snake_case_words __dunder__ 3.14159 1,000,000",
    "x",
    "ab",
    "MiXeD CaSe WoRdS mIxEd",
    "repeat repeat repeat repeat repeat",
    "\U0001f600" * 7,
    "𝐁𝐨𝐥𝐝 𝕕𝕠𝕦𝕓𝕝𝕖 ℌ𝔢𝔩𝔩𝔬",  # mathematical alphanumerics (4-byte, \w)
]

OPTIONS: list[dict[str, Any]] = [
    {"word_ngrams": [1, 1], "char_ngrams": None, "binary": True, "normalize": True},
    {"word_ngrams": [1, 1], "char_ngrams": [4, 4], "binary": True, "normalize": True},
    {"word_ngrams": [1, 3], "char_ngrams": [1, 5], "binary": False, "normalize": False},
    {"word_ngrams": None, "char_ngrams": [3, 5], "binary": True, "normalize": True},
    {"word_ngrams": [2, 2], "char_ngrams": [4, 4], "char_limit": 10, "binary": False},
    {"char_ngrams": [4, 4], "char_limit": 1, "binary": True},
    {"char_ngrams": [2, 6], "email": True, "tokens": ["url", "number", "currency", "caps"]},
]


def featurize(options: dict[str, Any], bits: int, texts: list[str], compiled: bool) -> Batch:
    spec = ModelSpec.from_dict({"algorithm": "pa1", "bits": bits, "text": options})
    f = Featurizer(spec, compiled_text=compiled, max_features=1 << 20)
    return f.transform([{"text": t, "label": 1} for t in texts])


def assert_identical(a: Batch, b: Batch) -> None:
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    assert a.data.tobytes() == b.data.tobytes()  # to the bit, not approximately


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("bits", [6, 20])  # 6: many collisions, summed in the same order
def test_the_corpus_gives_the_same_batch_both_ways(options: dict[str, Any], bits: int) -> None:
    assert_identical(
        featurize(options, bits, CORPUS, compiled=True),
        featurize(options, bits, CORPUS, compiled=False),
    )


@pytest.mark.parametrize("options", OPTIONS)
def test_one_text_at_a_time_equals_the_batch(options: dict[str, Any]) -> None:
    whole = featurize(options, 18, CORPUS, compiled=True)
    rows = Batch.concat([featurize(options, 18, [t], compiled=True) for t in CORPUS])
    assert_identical(whole, rows)


def test_the_kernel_emits_the_reference_names_in_the_reference_order() -> None:
    for wn, cn, limit, binary in [
        ((1, 1), None, None, True),
        ((1, 2), (4, 4), None, False),
        ((1, 3), (1, 5), 7, True),
        (None, (4, 4), None, True),
    ]:
        ref = TextFeaturizer(word_ngrams=wn, char_ngrams=cn, char_limit=limit, binary=binary)
        codes, vals, counts, bad = text_grams(CORPUS, wn, cn, limit, binary)
        assert bad == -1
        names = [ref.features(t) for t in CORPUS]
        assert counts.tolist() == [len(n) for n in names]
        assert codes.tolist() == [mmh3.hash(k, 0, signed=True) for n in names for k in n]
        assert vals.tolist() == [float(v) for n in names for v in n.values()]


@settings(deadline=None)  # the first call compiles
@given(st.binary(max_size=64))
def test_murmur3_is_mmh3(key: bytes) -> None:
    assert _murmur3(np.frombuffer(key, dtype=np.uint8), len(key)) == mmh3.hash(key, 0)


@settings(deadline=None)
@given(st.lists(st.text(max_size=40), max_size=8))
def test_lower_casing_the_joined_batch_is_lower_casing_each_text(texts: list[str]) -> None:
    got = lowered_utf8(texts).decode().split("\x00") if texts else []
    assert got == [t.replace("\x00", " ").lower() for t in texts]


def test_the_word_table_is_the_regex_word_class() -> None:
    table = word_table()
    rng = random.Random(3)
    for cp in [*range(0, 0x3000), *rng.sample(range(0x3000, 0x110000), 20_000)]:
        assert table[cp] == (re.match(r"\w", chr(cp)) is not None), hex(cp)


alphabet = st.sampled_from(list("aAbBσΣςİıßẞ é😀🇬🇧 \t\n.,!?-_0123456789£$\x00\u0301\u200b"))
texts_st = st.lists(
    st.one_of(st.text(max_size=60), st.text(alphabet, max_size=60)), min_size=1, max_size=10
)


@settings(max_examples=150, deadline=None)
@given(texts_st, st.sampled_from(OPTIONS), st.sampled_from([5, 12, 20]))
def test_random_text_gives_the_same_batch_both_ways(
    texts: list[str], options: dict[str, Any], bits: int
) -> None:
    texts = [t for t in texts if not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
    assert_identical(
        featurize(options, bits, texts, compiled=True),
        featurize(options, bits, texts, compiled=False),
    )


def test_a_large_random_stream_gives_the_same_batch_both_ways() -> None:
    rng = random.Random(7)
    pool = [w for t in CORPUS for w in t.split()] + ["http://a.b/c", "ok", "OK", "Ok"]
    texts = [" ".join(rng.choice(pool) for _ in range(rng.randint(0, 40))) for _ in range(2000)]
    for options in OPTIONS[:5]:
        assert_identical(
            featurize(options, 10, texts, compiled=True),
            featurize(options, 10, texts, compiled=False),
        )
