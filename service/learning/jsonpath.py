"""A JSON body of examples → a :class:`Batch`, without a Python object per example.

:func:`featurize_json` is a shortcut for :meth:`Featurizer.transform` of what ``orjson.loads``
would give: the compiled reader (:mod:`service.learning._jsonscan`) hashes the names and
parses the values straight from the bytes, and the featurizer's own pieces (the same name
caches, text kernel, schema layouts and CSR assembly, in the same order) build the batch, so
the result is the same to the bit. Whenever the body is anything but plainly valid — or it
holds something the reader does not handle (``meta``, escapes in names, dense lists, no
hashing, quadratic crosses) — it returns None and the caller takes the general path, which is
the one that accepts or refuses a body and names the field at fault.
"""

from __future__ import annotations

import json

import numpy as np

from service.errors import InvalidExample
from service.learning._jsonscan import (
    _POW10,
    EX_COLS,
    ID_A,
    ID_B,
    LABEL_A,
    LABEL_B,
    OK,
    TEXT_A,
    TEXT_B,
    TEXT_ESC,
    scan,
)
from service.learning.batch import Batch, assemble
from service.learning.features import Featurizer
from service.learning.values import MAX_ABS_VALUE, first_unencodable

MAX_ID_CHARS = 256  # as service.api.parsing

__all__ = ["EX_COLS", "featurize_json"]


def featurize_json(
    featurizer: Featurizer, raw: bytes, *, labels: bool, max_batch: int
) -> tuple[Batch, list[str | None]] | None:
    """The batch and the ids of a JSON body (``{"examples": [...]}`` or a list), or None
    when the general path must decide."""
    f = featurizer
    if not f.hashing or f._crosses is not None:
        return None
    buf = np.frombuffer(raw, dtype=np.uint8)
    colons = int(np.count_nonzero(buf == 58))  # bounds: a feature has a colon, an example
    braces = int(np.count_nonzero(buf == 123))  # a brace
    status, n, nnz, ex, codes, vals, kinds, names, spans, one = scan(
        buf, f.max_name_chars, _POW10, min(braces, max_batch + 1), colons
    )
    if status != OK or not 0 < n <= max_batch:
        return None
    try:
        raw.decode("utf-8")  # the reader hashed bytes: they must be valid UTF-8
    except UnicodeDecodeError:
        return None
    ex, codes, vals = ex[:n], codes[:nnz], vals[:nnz]
    # values the reader could not convert exactly
    for k in np.flatnonzero(kinds[:nnz]).tolist():
        vals[k] = float(raw[spans[k, 0] : spans[k, 1]])
    if nnz and not (np.abs(vals) <= MAX_ABS_VALUE).all():
        return None
    # ids and labels
    ids: list[str | None] = [None] * n
    for i in np.flatnonzero(ex[:, ID_A] >= 0).tolist():
        ident = raw[ex[i, ID_A] : ex[i, ID_B]].decode()
        if not 0 < len(ident) <= MAX_ID_CHARS:
            return None
        ids[i] = ident
    if labels:
        y = _labels(f, raw, ex)
        if y is None:
            return None
    else:
        y = np.full(n, -1, dtype=np.int32)
    # text
    text_rows = np.flatnonzero(ex[:, TEXT_A] >= 0).tolist()
    texts: list[str] = []
    if text_rows:
        if f._text is None:
            return None
        for i in text_rows:
            a, b = int(ex[i, TEXT_A]), int(ex[i, TEXT_B])
            try:
                t = json.loads(raw[a - 1 : b + 1]) if ex[i, TEXT_ESC] else raw[a:b].decode()
            except ValueError:  # pragma: no cover - the reader found a well-formed string
                return None
            if len(t) > f.max_text_chars:
                return None
            texts.append(t)
        if first_unencodable(texts) >= 0:
            return None
    if f._log1p and nnz:
        vals = np.copysign(np.log1p(np.abs(vals)), vals)
    try:
        return _build(f, raw, n, ex, codes, vals, names, one, text_rows, texts, y), ids
    except _GiveUp:
        return None


class _GiveUp(Exception):
    pass


def _labels(f: Featurizer, raw: bytes, ex: np.ndarray) -> np.ndarray | None:
    """Class indices of the examples' labels (each distinct label text read once)."""
    if (ex[:, LABEL_A] < 0).any():
        return None  # a missing label: the general path says which
    memo: dict[bytes, int] = {}
    y = np.empty(ex.shape[0], dtype=np.int32)
    for i, (a, b) in enumerate(ex[:, [LABEL_A, LABEL_B]].tolist()):
        token = raw[a:b]
        k = memo.get(token)
        if k is None:
            got, bad = f.labels.indices([json.loads(token)])
            if bad >= 0:
                return None
            k = memo[token] = int(got[0])
        y[i] = k
    return y


def _build(
    f: Featurizer,
    raw: bytes,
    n: int,
    ex: np.ndarray,
    codes: np.ndarray,
    vals: np.ndarray,
    names: np.ndarray,
    one: bool,
    text_rows: list[int],
    texts: list[str],
    y: np.ndarray,
) -> Batch:
    """The featurizer's ``_build`` for the parts the reader found, in the same order."""
    errors: list[InvalidExample] = []
    ends = ex[:, 0]
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    nnz = codes.shape[0]
    if nnz:
        width = int(ends[0])
        if one and not texts and 0 < width <= f.max_features:
            key = tuple(raw[a:b].decode() for a, b in names[:width].tolist())
            if f._codes.lookup([key], errors) is None or errors:
                raise _GiveUp
            return f._one_schema(key, vals, n, y)
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(ends, prepend=0))
        parts.append((rows, codes, vals))
    if texts:
        assert f._text is not None
        got = f._text.parts(text_rows, texts, errors)
        if got is None or errors:
            raise _GiveUp
        parts.append(got)
    if len(parts) == 1:
        rows, c, v = parts[0]
    elif parts:
        rows, c, v = (np.concatenate(p) for p in zip(*parts, strict=True))
    else:
        rows = np.zeros(0, dtype=np.int64)
        c = np.zeros(0, dtype=np.int64)
        v = np.zeros(0, dtype=np.float64)
    indptr, indices, data, most = assemble(rows, c, v, n, f.dim - 1, f.normalize, f.max_features)
    if most >= 0:
        raise _GiveUp
    return Batch(indptr, indices, data, y)
