"""Text options for mail: char_limit, e-mail headers in their own namespace, special tokens —
their validation in the spec, their meaning, and that malformed mail never raises."""

from __future__ import annotations

import base64
import re
from typing import Any

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.errors import InvalidExample, InvalidSpec
from service.learning.features import Featurizer
from service.learning.spec import ModelSpec, TextSpec
from service.learning.text import (
    MAX_EXTRA_CHARS,
    TextFeaturizer,
    looks_like_message,
    parse_message,
)

# --- the spec ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "field", "needle"),
    [
        ({"char_ngrams": [4, 4], "char_limit": 0}, "text.char_limit", "1.."),
        ({"char_ngrams": [4, 4], "char_limit": -5}, "text.char_limit", "1.."),
        ({"char_ngrams": [4, 4], "char_limit": "100"}, "text.char_limit", "integer"),
        ({"char_ngrams": [4, 4], "char_limit": True}, "text.char_limit", "integer"),
        ({"char_ngrams": [4, 4], "char_limit": 100.0}, "text.char_limit", "integer"),
        ({"char_ngrams": [4, 4], "char_limit": 2**27}, "text.char_limit", "1.."),
        ({"char_limit": 100}, "text.char_limit", "needs char_ngrams"),
        ({"email": "yes"}, "text.email", "true or false"),
        ({"email": 1}, "text.email", "true or false"),
        ({"tokens": "url"}, "text.tokens", "list"),
        ({"tokens": ["url", "emoji"]}, "text.tokens", "'emoji'"),
        ({"tokens": ["url", "url"]}, "text.tokens", "repeat"),
        ({"tokens": [1]}, "text.tokens", "list"),
    ],
)
def test_bad_text_options_name_the_field(text: dict[str, Any], field: str, needle: str) -> None:
    with pytest.raises(InvalidSpec, match=needle) as e:
        ModelSpec.from_dict({"algorithm": "pa1", "text": text})
    assert e.value.field == field


def test_text_options_round_trip_canonically() -> None:
    d = {"char_ngrams": [4, 4], "char_limit": 500, "email": True, "tokens": ["caps", "url"]}
    s = ModelSpec.from_dict({"algorithm": "pa1", "text": d})
    assert s.text == TextSpec((1, 1), (4, 4), True, True, 500, True, ("url", "caps"))
    out = s.to_dict()["text"]
    assert out["tokens"] == ["url", "caps"] and out["char_limit"] == 500 and out["email"] is True
    assert ModelSpec.from_dict(s.to_dict()) == s
    plain = ModelSpec.from_dict({"algorithm": "pa1", "text": {}}).text
    assert plain is not None
    assert (plain.char_limit, plain.email, plain.tokens) == (None, False, ())


# --- char_limit --------------------------------------------------------------------------------


@given(st.text(max_size=80), st.integers(1, 40))
def test_char_limit_keeps_the_grams_inside_the_first_n_characters(text: str, limit: int) -> None:
    full = TextFeaturizer(word_ngrams=(1, 1), char_ngrams=(2, 4))
    cut = TextFeaturizer(word_ngrams=(1, 1), char_ngrams=(2, 4), char_limit=limit)
    words_full, chars_full = full.tokens(text)
    words_cut, chars_cut = cut.tokens(text)
    assert words_cut == words_full  # word n-grams are not limited
    words = re.findall(r"\w+", text.lower())
    s = (" " + " ".join(words) + " ")[:limit] if words else ""
    expected = {s[i : i + n] for n in (2, 3, 4) for i in range(len(s) - n + 1)}
    assert set(chars_cut) == expected
    assert set(chars_cut) <= set(chars_full)


def test_char_limit_example_of_the_docs() -> None:
    t = TextFeaturizer(word_ngrams=None, char_ngrams=(4, 4), char_limit=8)
    assert list(t.tokens("Buy now, pay later")[1]) == [" buy", "buy ", "uy n", "y no", " now"]


# --- e-mail ------------------------------------------------------------------------------------

MAIL = (
    "From alice@example.com Mon Jan  1 00:00:00 2024\n"
    "Return-Path: <alice@example.com>\n"
    "From: Alice <alice@example.com>\n"
    "To: bob@example.org\n"
    "Subject: =?utf-8?q?Cheap_p=C3=AFlls?=\n"
    "MIME-Version: 1.0\n"
    'Content-Type: multipart/mixed; boundary="B"\n'
    "\n"
    "--B\n"
    "Content-Type: text/plain; charset=utf-8\n"
    "Content-Transfer-Encoding: base64\n"
    "\n"
    f"{base64.b64encode('Buy café pills'.encode()).decode()}\n"
    "--B\n"
    "Content-Type: image/gif\n"
    "Content-Transfer-Encoding: base64\n"
    "\n"
    "R0lGODlhAQABAAAAACw=\n"
    "--B--\n"
)


def test_headers_have_their_own_namespace_and_the_body_is_decoded() -> None:
    names = TextFeaturizer(email=True).features(MAIL)
    body = [n for n in names if n.startswith("w:")]
    assert body == ["w:buy", "w:café", "w:pills"]  # base64 decoded, in the declared charset
    assert [n for n in names if n.startswith("h:subject:")] == [
        "h:subject:cheap",
        "h:subject:pïlls",  # RFC 2047 encoded word decoded
    ]
    assert "h:from:@example.com" in names and "h:to:@example.org" in names
    assert "h:from:alice" in names and "h:to:bob" in names
    assert [n for n in names if "part" in n] == ["h:part:text/plain", "h:part:image/gif"]
    assert not any("r0lgod" in n.lower() for n in names)  # the attachment is not text
    # without the option the same text is all body (headers and base64 included)
    plain = TextFeaturizer().features(MAIL)
    assert "w:subject" in plain and not any(n.startswith("h:") for n in plain)


def test_a_subject_word_and_a_body_word_are_different_features() -> None:
    spec = ModelSpec.from_dict({"algorithm": "pa1", "bits": 20, "text": {"email": True}})
    b = Featurizer(spec).transform(
        [{"text": "Subject: prize\n\nhello", "label": 1}, {"text": "prize", "label": 1}]
    )
    first = set(b.indices[b.indptr[0] : b.indptr[1]].tolist())
    second = set(b.indices[b.indptr[1] : b.indptr[2]].tolist())
    assert first.isdisjoint(second)  # h:subject:prize vs w:prize
    h = mmh3.hash("h:subject:prize", 0, signed=True)
    assert abs(h) % 2**20 in first


def test_html_bodies_lose_their_markup_and_keep_their_links() -> None:
    mail = (
        "Subject: hi\nContent-Type: text/html; charset=iso-8859-1\n"
        "Content-Transfer-Encoding: quoted-printable\n\n"
        "<html><style>p {color: red}</style><p>Gro=DFe &amp; <b>WIN</b></p>"
        '<a href=3D"http://win.example/x">click</a><script>var evil=1</script></html>'
    )
    t = TextFeaturizer(email=True, tokens=("url", "caps"))
    names = t.features(mail)
    body = [n[2:] for n in names if n.startswith("w:")]
    assert body[:4] == ["große", "win", "click", "http"]  # qp + latin-1 + entities decoded
    assert not {"color", "red", "evil", "var", "style", "html"} & set(body)
    assert "t:url:win.example" in names and "t:caps:win" in names


@pytest.mark.parametrize(
    "text",
    [
        "Note: call me\n\nbye",  # not a standard field: a body
        "hello: world",
        "   Subject: indented",
        "Dear friend,\n\nSubject: the body",
        "",
        "\n\n\n",
    ],
)
def test_texts_that_are_not_messages_are_all_body(text: str) -> None:
    assert not looks_like_message(text)
    assert TextFeaturizer(email=True).features(text) == TextFeaturizer().features(text)


@pytest.mark.parametrize(
    "text",
    [
        'Subject: x\nContent-Type: multipart/mixed; boundary="\n\n--\x00',
        "Subject: x\nContent-Type: text/plain; charset=no-such-charset\n\n\xe9t\xe9",
        "Subject: x\nContent-Transfer-Encoding: base64\n\n!!!not base64",
        "Subject: x\nContent-Transfer-Encoding: quoted-printable\n\n=ZZ=\n=",
        "Subject: =?unknown?B?!!!?=\n\nbody",
        "Subject: x\nContent-Type: multipart/alternative\n\nno boundary at all",
        "Subject:\n\tfolded\n continued\n\nbody",
        "From: <<<@@@>>>\nTo: ,,,\r\n\r\nbody",
    ],
)
def test_malformed_mail_never_raises(text: str) -> None:
    t = TextFeaturizer(email=True, tokens=("url", "number", "currency", "caps"))
    names = t.features(text)
    assert all(isinstance(n, str) for n in names)


header_line = st.sampled_from(
    ["Subject: ", "From: ", "To: ", "Content-Type: ", "Content-Transfer-Encoding: ", "X-A: ",
     "MIME-Version: 1.0", " ", "\t", "--", "boundary=", "=?utf-8?b?", "?=", "\n", "\r\n"]
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(header_line, st.text(max_size=12)), max_size=30))
def test_random_mail_like_text_never_raises(pieces: list[str]) -> None:
    text = "Subject: x\n" + "".join(pieces)
    t = TextFeaturizer(email=True, tokens=("url", "number", "currency", "caps"))
    assert all(isinstance(n, str) for n in t.features(text))
    parsed = parse_message(text)
    assert (parsed is None) == (not looks_like_message(text))


# --- special tokens ----------------------------------------------------------------------------


def test_special_tokens_of_each_kind() -> None:
    text = "WIN £1,000 now! Text 80086 or visit https://user@Bit.ly:8080/a and www.Example.com."
    t = TextFeaturizer(tokens=("url", "number", "currency", "caps"), binary=False)
    _, extra = t.extras(text)
    assert extra["t:url"] == 2
    assert extra["t:url:bit.ly"] == 1 and extra["t:url:example.com"] == 1
    assert extra["t:num:5"] == 1 and extra["t:num:3"] == 1 and extra["t:num:4"] == 1
    assert extra["t:cur"] == 1 and extra["t:cur:£"] == 1
    assert extra["t:caps"] == 1 and extra["t:caps:win"] == 1
    only_urls = TextFeaturizer(tokens=["url"]).extras(text)[1]
    assert {n.split(":")[1] for n in only_urls} == {"url"}
    assert TextFeaturizer(tokens=("number",)).extras("x" + "9" * 40)[1] == {"t:num:16": 1}


def test_special_tokens_are_hashed_and_normalised_with_the_text() -> None:
    spec = ModelSpec.from_dict(
        {"algorithm": "pa1", "bits": 22, "text": {"tokens": ["caps"], "normalize": True}}
    )
    b = Featurizer(spec).transform([{"text": "FREE", "label": 1}])
    expected = {
        abs(mmh3.hash(n, 0, signed=True)) % 2**22 for n in ("w:free", "t:caps", "t:caps:free")
    }
    assert set(b.indices.tolist()) == expected
    np.testing.assert_allclose(np.abs(b.data), 1 / np.sqrt(3))


def test_a_lone_surrogate_is_an_invalid_example_not_a_crash() -> None:
    # JSON's "\ud800" decodes (with the stdlib json) to a str that is not valid UTF-8; mmh3
    # crashes the process on such a str, so the featurizer must refuse it first
    spec = ModelSpec.from_dict({"algorithm": "pa1", "bits": 10, "text": {"tokens": ["caps"]}})
    f = Featurizer(spec)
    with pytest.raises(InvalidExample, match="surrogate") as e:
        f.transform([{"text": "fine", "label": 1}, {"text": "bad \ud800", "label": 1}])
    assert (e.value.field, e.value.index) == ("text", 1)
    with pytest.raises(InvalidExample) as e:
        f.transform([{"features": {"x\udcff": 1.0}, "label": 1}])
    assert e.value.field == "features.x\udcff" and e.value.index == 0


def test_header_and_token_names_are_cut_to_a_bounded_length() -> None:
    giant = "h" * 100_000
    text = f"Subject: {giant}\n\nsee http://{giant}.com now"
    t = TextFeaturizer(email=True, tokens=("url",))
    _, extra = t.extras(text)
    assert max(map(len, extra)) == MAX_EXTRA_CHARS
    assert "h:subject:" + "h" * (MAX_EXTRA_CHARS - len("h:subject:")) in extra


HOSTILE = [
    "1," * 500_000,  # one endless amount
    "1 " * 500_000,
    "$" * 1_000_000,
    "http://" + "a." * 500_000,
    "Subject: x\nContent-Type: text/html\n\n" + "<" * 1_000_000,
    "Subject: x\nContent-Type: text/html\n\n" + "<script " * 100_000,
    "Subject: x\nContent-Type: text/html\n\n" + "<style>a</style>" * 50_000,
    "Subject: x\nContent-Type: text/html\n\n" + "href=" * 200_000,
    "From: " + "@." * 500_000 + "\n\nbody",
    "Subject: " + "a:" * 500_000 + "\n\nbody",
]


@pytest.mark.timeout(120)  # every pattern is linear: a quadratic one takes hours on these
@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_megabyte_inputs_built_to_make_regexes_backtrack_finish(text: str) -> None:
    t = TextFeaturizer(email=True, tokens=("url", "number", "currency", "caps"))
    _, extra = t.extras(text)
    assert all(len(name) <= MAX_EXTRA_CHARS for name in extra)
