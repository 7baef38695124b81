"""Body parsing: JSON shapes, NDJSON, svmlight, content types, limits — and where errors point."""

from __future__ import annotations

import pytest

from service.api.parsing import body_format, parse_examples
from service.errors import InvalidExample, MalformedBody, PayloadTooLarge, UnsupportedMediaType


def parse(raw: bytes, kind: str = "json", max_batch: int = 100):  # type: ignore[no-untyped-def]
    return parse_examples(raw, kind, max_batch=max_batch)


def test_json_single_batch_and_list() -> None:
    one = parse(b'{"features": {"a": 1}, "label": 1, "id": "x"}')
    assert one.single and one.ids == ["x"] and one.examples[0]["label"] == 1
    batch = parse(
        b'{"examples": [{"text": "a", "label": 0}, {"text": "b", "label": 1, "id": "7"}]}'
    )
    assert not batch.single and batch.ids == [None, "7"]
    listed = parse(b'[{"text": "a", "label": 0}]')
    assert not listed.single and len(listed.examples) == 1


def test_ndjson_and_svmlight() -> None:
    nd = parse(b'{"text": "a", "label": 1}\n\n{"text": "b", "label": -1}\n', "ndjson")
    assert [e["text"] for e in nd.examples] == ["a", "b"]
    sv = parse(b"+1 3:1.5 7:-2 # comment\n-1 qid:4 2:1\n\n", "svmlight")
    assert sv.examples[0] == {"label": 1, "features": {"3": 1.5, "7": -2.0}}
    assert sv.examples[1] == {"label": -1, "features": {"2": 1.0}}


@pytest.mark.parametrize(
    ("raw", "kind", "exc", "field", "index"),
    [
        (b"{not json", "json", MalformedBody, "body", None),
        (b"", "json", MalformedBody, "body", None),
        (b'{"a": 1e400}', "json", MalformedBody, "body", None),
        (b'{"examples": 3}', "json", InvalidExample, "examples", None),
        (b'{"examples": [], "x": 1}', "json", InvalidExample, "x", None),
        (b'{"examples": []}', "json", InvalidExample, "examples", None),
        (b'{"examples": [{"text": "a"}, 5]}', "json", InvalidExample, "examples", 1),
        (b'{"examples": [{"text": "a"}, {"id": [1]}]}', "json", InvalidExample, "id", 1),
        (b'{"examples": [{"id": true}]}', "json", InvalidExample, "id", 0),
        # ids are strings: a number would collide with its string form ("7" vs 7)
        (b'{"examples": [{"id": "7"}, {"id": 7}]}', "json", InvalidExample, "id", 1),
        (b'{"examples": [{"id": 7.5}]}', "json", InvalidExample, "id", 0),
        (b'"just a string"', "json", InvalidExample, "body", None),
        (b'{"text": "a"}\n{"text": ', "ndjson", MalformedBody, "body", 1),
        (b"1 3:1\n-1 4:abc\n", "svmlight", InvalidExample, "features.4", 1),
        (b"1 3:1\n-1 junk\n", "svmlight", MalformedBody, "features", 1),
        # U+2028 (a line separator to str.splitlines) inside a line does not split it
        ("1 3:1\u2028-1 4:1\n".encode(), "svmlight", InvalidExample, "features.3", 0),
    ],
)
def test_errors_name_field_and_index(
    raw: bytes, kind: str, exc: type[Exception], field: str, index: int | None
) -> None:
    with pytest.raises(exc) as info:
        parse(raw, kind)
    err = info.value
    assert err.field == field  # type: ignore[attr-defined]
    assert err.index == index  # type: ignore[attr-defined]


def test_svmlight_errors_are_our_own_words() -> None:
    with pytest.raises(InvalidExample) as info:
        parse(b"1 3:1\n-1 " + b"9" * 5000 + b":1\n", "svmlight")
    msg = info.value.message
    assert "5000 digits" in msg and "line 2" in msg and "sys.set_int_max_str_digits" not in msg
    assert len(msg) < 200
    one = parse("1 a\u2028\u0085\x1cb:1 # c\u2028-1 d:1\n".encode(), "svmlight").examples
    # the Unicode separators stay inside their token / the comment
    assert one == [{"label": 1, "features": {"a\u2028\u0085\x1cb": 1.0}}]


def test_limits() -> None:
    with pytest.raises(PayloadTooLarge) as info:
        parse(b"[" + b",".join([b'{"text": "a"}'] * 5) + b"]", max_batch=4)
    assert info.value.field == "examples"
    # what is inside an example is the featurizer's to check (tests/api/test_ingest_limits.py)
    long_text = parse(b'[{"text": "a"}, {"text": "aaaaaaaaaaa", "meta": {"x": [1]}}]')
    assert len(long_text.examples) == 2


@pytest.mark.parametrize(
    ("ctype", "fmt", "kind"),
    [
        ("application/json", None, "json"),
        ("application/json; charset=utf-8", None, "json"),
        (None, None, "json"),
        ("application/vnd.api+json", None, "json"),
        ("application/x-ndjson", None, "ndjson"),
        ("text/x-svmlight", None, "svmlight"),
        ("text/plain", "svmlight", "svmlight"),
        ("text/plain", "ndjson", "ndjson"),
        ("application/json", "json", "json"),
    ],
)
def test_body_format(ctype: str | None, fmt: str | None, kind: str) -> None:
    assert body_format(ctype, fmt) == kind


@pytest.mark.parametrize(
    ("ctype", "fmt", "field"),
    [
        ("text/html", None, "content-type"),
        ("text/plain", None, "content-type"),
        ("application/json", "svmlight", "format"),
        ("text/plain", "csv", "format"),
    ],
)
def test_body_format_415(ctype: str, fmt: str | None, field: str) -> None:
    with pytest.raises(UnsupportedMediaType) as info:
        body_format(ctype, fmt)
    assert info.value.field == field
