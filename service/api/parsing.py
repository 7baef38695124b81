"""Request bodies → lists of example mappings, fast.

orjson parses JSON and NDJSON; svmlight is split by hand. No pydantic object is built per
example. Here we only check the *shape* (objects, ids, batch size) and say where it is wrong;
what is inside an example (names, values, labels, text and their limits) is checked once, by
the model's featurizer (:mod:`service.learning.features`), which names the field and index
at fault.

Content types (the ``format`` query parameter overrides them when the type is ``text/plain``
or ``application/octet-stream``):

- ``application/json`` (or none): one example object, ``{"examples": [...]}`` or a list;
- ``application/x-ndjson`` (also ``application/ndjson``, ``application/jsonl``): one example
  per line;
- ``text/x-svmlight`` (or ``text/plain`` + ``?format=svmlight``): ``LABEL idx:val ...`` per line,
  ``#`` comments ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from service.errors import InvalidExample, MalformedBody, PayloadTooLarge, UnsupportedMediaType

JSON_TYPES = frozenset({"application/json", ""})
NDJSON_TYPES = frozenset({"application/x-ndjson", "application/ndjson", "application/jsonl"})
SVMLIGHT_TYPES = frozenset({"text/x-svmlight", "application/x-svmlight"})
GENERIC_TYPES = frozenset({"text/plain", "application/octet-stream"})
FORMATS = ("json", "ndjson", "svmlight")
MAX_ID_CHARS = 256


@dataclass(frozen=True, slots=True)
class Parsed:
    """The examples of a body and their idempotency ids (``None`` where absent)."""

    examples: list[Mapping[str, Any]]
    ids: list[str | None]
    single: bool  # the body was one example object (the answer is shaped the same)


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def body_format(content_type: str | None, fmt: str | None) -> str:
    """Which parser a body needs, or 415."""
    mt = media_type(content_type)
    if fmt is not None and fmt not in FORMATS:
        raise UnsupportedMediaType(
            f"format must be one of {list(FORMATS)}, got {fmt!r}", field="format"
        )
    if mt in GENERIC_TYPES:
        if fmt is None:
            raise UnsupportedMediaType(
                f"content type {mt!r} needs ?format=json|ndjson|svmlight", field="content-type"
            )
        return fmt
    if mt in JSON_TYPES or mt.endswith("+json"):
        kind = "json"
    elif mt in NDJSON_TYPES:
        kind = "ndjson"
    elif mt in SVMLIGHT_TYPES:
        kind = "svmlight"
    else:
        raise UnsupportedMediaType(
            f"content type {mt!r} is not supported: use application/json, "
            "application/x-ndjson or text/x-svmlight",
            field="content-type",
        )
    if fmt is not None and fmt != kind:
        raise UnsupportedMediaType(
            f"format={fmt!r} contradicts the content type {mt!r}", field="format"
        )
    return kind


def _loads(raw: bytes | str, where: str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise MalformedBody(f"{where} is not valid JSON: {exc}", field="body") from exc


def parse_json(raw: bytes) -> tuple[list[Any], bool]:
    if not raw.strip():
        raise MalformedBody("the body is empty", field="body")
    doc = _loads(raw, "the body")
    if isinstance(doc, list):
        return doc, False
    if isinstance(doc, dict):
        if "examples" in doc:
            examples = doc["examples"]
            if not isinstance(examples, list):
                raise InvalidExample(
                    f"examples must be a list, got {type(examples).__name__}", field="examples"
                )
            extra = set(doc) - {"examples"}
            if extra:
                raise InvalidExample(
                    f"unknown key {sorted(extra)[0]!r} beside examples", field=sorted(extra)[0]
                )
            return examples, False
        return [doc], True
    raise InvalidExample(
        f'the body must be an example object, {{"examples": [...]}} or a list, got {type(doc).__name__}',
        field="body",
    )


def parse_ndjson(raw: bytes) -> list[Any]:
    out: list[Any] = []
    for lineno, line in enumerate(raw.splitlines()):
        if not line.strip():
            continue
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError as exc:
            raise MalformedBody(
                f"line {lineno + 1} (example {len(out)}) is not valid JSON: {exc}",
                field="body",
                index=len(out),
            ) from exc
    return out


MAX_INDEX_DIGITS = 19  # an svmlight index is an integer below 2**63


def _number(text: str) -> int | float | str:
    if len(text) > 40:  # no label is a 40-digit number; int() of 5,000 digits raises
        return text
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def parse_svmlight(raw: bytes) -> list[Any]:
    """``LABEL idx:val idx:val ...``; indices become feature names (strings) as given.

    Lines end at ``\n`` only and tokens are split on ASCII whitespace only (the split is done
    on bytes), so Unicode separators such as U+2028 stay inside their token instead of
    silently starting a new example.
    """
    try:
        raw.decode()
    except UnicodeDecodeError as exc:
        raise MalformedBody("svmlight body is not UTF-8", field="body") from exc
    out: list[Any] = []
    for lineno, line in enumerate(raw.split(b"\n")):
        content = line.split(b"#", 1)[0].split()
        if not content:
            continue
        i = len(out)
        features: dict[str, float] = {}
        for tok_b in content[1:]:
            tok = tok_b.decode()
            name, sep, value = tok.rpartition(":")
            if not sep or not name:
                raise MalformedBody(
                    f"line {lineno + 1}: token {tok[:40]!r} is not idx:value",
                    field="features",
                    index=i,
                )
            if name == "qid":
                continue
            if len(name) > MAX_INDEX_DIGITS and name.isascii() and name.isdigit():
                raise InvalidExample(
                    f"line {lineno + 1}: feature index {name[:12]}… has {len(name)} digits; "
                    f"an svmlight index is an integer below 2**63",
                    field="features",
                    index=i,
                )
            try:
                features[name] = float(value)
            except ValueError as exc:
                raise InvalidExample(
                    f"line {lineno + 1}: value {value[:40]!r} of feature {name[:40]!r} is not a number",
                    field=f"features.{name[:40]}",
                    index=i,
                ) from exc
        out.append({"label": _number(content[0].decode()), "features": features})
    return out


def parse_examples(raw: bytes, kind: str, *, max_batch: int) -> Parsed:
    """Parse a body of the given kind and check its *shape*: a non-empty list of at most
    ``max_batch`` objects, each ``id`` absent or a short string. What is inside an example
    (features, text, label, their sizes) is the featurizer's to check, once."""
    single = False
    if kind == "json":
        items, single = parse_json(raw)
    elif kind == "ndjson":
        items = parse_ndjson(raw)
    else:
        items = parse_svmlight(raw)
    if not items:
        raise InvalidExample("no examples in the body", field="examples")
    if len(items) > max_batch:
        raise PayloadTooLarge(
            f"{len(items)} examples in one request, more than max_batch={max_batch}",
            field="examples",
        )
    try:
        ids = [item.get("id") for item in items]
    except AttributeError:  # an item is not an object
        i = next(i for i, item in enumerate(items) if not isinstance(item, dict))
        raise InvalidExample(
            f"example {i} must be an object, got {type(items[i]).__name__}",
            field="examples",
            index=i,
        ) from None
    for i, ident in enumerate(ids):
        if ident is not None and not (type(ident) is str and 0 < len(ident) <= MAX_ID_CHARS):
            # a number is refused: 7 and "7" would be one id (docs/api.md)
            raise InvalidExample(
                f"id must be a non-empty string of at most {MAX_ID_CHARS} chars "
                f'(a number is not an id: send "7", not 7), got {str(ident)[:40]!r}',
                field="id",
                index=i,
            )
    return Parsed(items, ids, single)
