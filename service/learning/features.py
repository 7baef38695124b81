"""Features: the sparse batch type the compiled loops take, and (to come) hashing and text.

A :class:`Batch` is a CSR matrix plus labels. Rows have unique, sorted column indices, so
‖x‖² is the sum of the squared values of a row and the compiled loops need no dedup.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Protocol

import mmh3
import numpy as np
from numba import njit

from service.errors import InvalidExample
from service.learning._textkernel import text_grams
from service.learning.text import WORD_RE, TextFeaturizer


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch of sparse examples in CSR form.

    >>> b = Batch.from_rows([([0, 3], [1.0, 2.0]), ([1], [-1.0])], [1, 0])
    >>> b.n, b.nnz
    (2, 3)
    >>> b.row(1).indices.tolist(), b.row(1).y.tolist()
    ([1], [0])
    """

    indptr: np.ndarray  # int64 (n + 1,)
    indices: np.ndarray  # int32 (nnz,), unique and sorted within a row
    data: np.ndarray  # float64 (nnz,)
    y: np.ndarray  # int32 (n,): class index, -1 where unlabeled

    @property
    def n(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def nnz(self) -> int:
        return int(self.indices.shape[0])

    def row(self, i: int) -> Batch:
        """Row ``i`` as a batch of one."""
        lo, hi = int(self.indptr[i]), int(self.indptr[i + 1])
        return Batch(
            np.array([0, hi - lo], dtype=np.int64),
            self.indices[lo:hi].copy(),
            self.data[lo:hi].copy(),
            self.y[i : i + 1].copy(),
        )

    def slice(self, start: int, stop: int) -> Batch:
        """Rows ``start:stop`` as a batch (copies)."""
        lo, hi = int(self.indptr[start]), int(self.indptr[stop])
        return Batch(
            (self.indptr[start : stop + 1] - lo).astype(np.int64),
            self.indices[lo:hi].copy(),
            self.data[lo:hi].copy(),
            self.y[start:stop].copy(),
        )

    @staticmethod
    def empty() -> Batch:
        return Batch(
            np.zeros(1, dtype=np.int64),
            np.zeros(0, dtype=np.int32),
            np.zeros(0, dtype=np.float64),
            np.zeros(0, dtype=np.int32),
        )

    @staticmethod
    def concat(batches: Sequence[Batch]) -> Batch:
        """The rows of several batches, in order."""
        if not batches:
            return Batch.empty()
        offsets = np.cumsum([0] + [b.nnz for b in batches[:-1]])
        indptr = np.concatenate(
            [np.zeros(1, dtype=np.int64)]
            + [b.indptr[1:] + off for b, off in zip(batches, offsets, strict=True)]
        ).astype(np.int64)
        return Batch(
            indptr,
            np.concatenate([b.indices for b in batches]).astype(np.int32),
            np.concatenate([b.data for b in batches]).astype(np.float64),
            np.concatenate([b.y for b in batches]).astype(np.int32),
        )

    @staticmethod
    def from_rows(rows: Sequence[tuple[Sequence[int], Sequence[float]]], y: Sequence[int]) -> Batch:
        """Build a batch from (indices, values) pairs; duplicates are summed, indices sorted."""
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        all_idx: list[np.ndarray] = []
        all_val: list[np.ndarray] = []
        for i, (idx, val) in enumerate(rows):
            ii = np.asarray(idx, dtype=np.int64)
            vv = np.asarray(val, dtype=np.float64)
            uniq, inv = np.unique(ii, return_inverse=True)
            summed = np.zeros(uniq.shape[0], dtype=np.float64)
            np.add.at(summed, inv, vv)
            all_idx.append(uniq.astype(np.int32))
            all_val.append(summed)
            indptr[i + 1] = indptr[i] + uniq.shape[0]
        indices = np.concatenate(all_idx) if all_idx else np.zeros(0, dtype=np.int32)
        data = np.concatenate(all_val) if all_val else np.zeros(0, dtype=np.float64)
        return Batch(indptr, indices.astype(np.int32), data, np.asarray(y, dtype=np.int32))


# --------------------------------------------------------------------------------------------
# Featurizer: examples (JSON-like mappings) -> Batch, with strict validation.
# --------------------------------------------------------------------------------------------

MAX_ABS_VALUE = 1e100
"""Largest |value| a feature may have. Beyond it (or NaN/±inf) an example is rejected: the
square of a value must stay finite even summed over ``max_features`` features (‖x‖² feeds every
PA step size), and 1e100² · 1e5 = 1e205 still does."""

ALLOWED_KEYS = frozenset({"features", "text", "label", "id"})
DEFAULT_CLASSES: tuple[Any, ...] = (-1, 1)
BINARY_ALIASES: dict[Any, int] = {
    -1: 0, 0: 0, 1: 1, "-1": 0, "0": 0, "1": 1, "+1": 1,
}  # fmt: skip
"""Labels the default binary model accepts: −1/+1, 0/1 and their strings; true/false too,
as ``True == 1`` and ``False == 0`` in Python (and so in this dict)."""

SCHEMA_CACHE_SIZE = 4096
"""How many distinct tuples of feature names the featurizer remembers (then it starts over)."""

CACHE_BYTES = 16 << 20
"""Default bound on the memory of a featurizer's caches (name → hash, tuple of names → codes
and layouts, e-mail/token names → hash), counted in bytes of the names and arrays they hold:
past it every cache starts over, so no stream of distinct names, however long, grows a process
beyond it. (The compiled text path caches nothing.)"""

MAX_NAME_CHARS = 1024
"""Default longest feature name (characters); a longer one is an invalid example."""

MAX_TOKEN_CHARS = 4096
"""Default longest word token of a text (characters of a ``\\w+`` run of the lower-cased text,
or of a decoded e-mail body); a text with a longer one is an invalid example."""

FIELD_NAME_CHARS = 64
"""How much of a feature name an error's ``field`` quotes (a longer name is cut, with "…")."""

_MISSING = object()


class TextOptions(Protocol):
    """What the featurizer reads from a text spec (``service.learning.spec.TextSpec``)."""

    @property
    def word_ngrams(self) -> tuple[int, int] | None: ...
    @property
    def char_ngrams(self) -> tuple[int, int] | None: ...
    @property
    def binary(self) -> bool: ...
    @property
    def normalize(self) -> bool: ...


class FeatureSpec(Protocol):
    """What the featurizer reads from a model spec (``service.learning.spec.ModelSpec``)."""

    @property
    def dim(self) -> int: ...
    @property
    def hashing(self) -> bool: ...
    @property
    def classes(self) -> tuple[Any, ...]: ...
    @property
    def positive(self) -> Any: ...
    @property
    def text(self) -> TextOptions | None: ...
    @property
    def quadratic(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def normalize(self) -> bool: ...
    @property
    def transform(self) -> str: ...


TRANSFORMS = ("none", "log1p")
"""Value transforms of named and dense features: ``log1p`` is ``sign(v)·log(1 + |v|)``, which
tames counts and lengths spanning orders of magnitude (Spambase's ``capitalTotal``) with no
state, so every API process and worker featurizes alike."""


class Labels:
    """The label ↔ class-index mapping of a model.

    Binary: index 0 is the negative class, 1 the positive one (``positive``, default the
    second declared class). The default classes ``(-1, 1)`` also accept 0/1, true/false and
    the strings "-1", "+1", "0", "1". Declared classes accept exactly themselves (a float equal
    to an int class, like ``2.0`` for ``2``, is the same JSON number and is accepted).

    >>> lab = Labels(("ham", "spam"), "spam")
    >>> lab.index("spam"), lab.name(0)
    (1, 'ham')
    >>> Labels((-1, 1), 1).index(True)
    1
    """

    __slots__ = ("_map", "_names", "_reject_bool", "n_classes")

    def __init__(self, classes: Sequence[Any], positive: Any = None) -> None:
        classes = tuple(classes)
        if len(classes) < 2:
            raise ValueError(f"classes must name at least 2 classes, got {list(classes)!r}")
        if len(classes) == 2:
            pos = classes[1] if positive is None else positive
            if pos not in classes:
                raise ValueError(f"positive must be one of the classes, got {pos!r}")
            neg = classes[0] if pos == classes[1] else classes[1]
            names: tuple[Any, ...] = (neg, pos)
        else:
            names = classes
        self._names = names
        self.n_classes = len(names)
        if classes == DEFAULT_CLASSES and names == DEFAULT_CLASSES:
            self._map: dict[Any, int] = dict(BINARY_ALIASES)
            self._reject_bool = False
        else:
            self._map = {c: i for i, c in enumerate(names)}
            self._reject_bool = True

    def index(self, value: Any) -> int:
        """The class index of a label, or ``ValueError`` naming it."""
        if self._reject_bool and type(value) is bool:
            raise ValueError(f"label {value!r} is not one of the classes {list(self._names)!r}")
        try:
            return self._map[value]
        except (KeyError, TypeError):
            raise ValueError(
                f"label {value!r} is not one of the classes {list(self._names)!r}"
            ) from None

    def name(self, index: int) -> Any:
        """The class as the client wrote it in the spec."""
        if not 0 <= index < self.n_classes:
            raise ValueError(f"class index must be in 0..{self.n_classes - 1}, got {index}")
        return self._names[index]

    def indices(self, values: list[Any]) -> tuple[np.ndarray, int]:
        """Class indices of many labels; also the position of the first bad one (or -1)."""
        try:
            got = list(map(self._map.get, values))
        except TypeError:  # an unhashable label: find it the slow way
            got = [self._map.get(v) if _hashable(v) else None for v in values]
        bad = -1
        if None in got:
            bad = got.index(None)
        if self._reject_bool and bool in set(map(type, values)):
            first_bool = next(i for i, v in enumerate(values) if type(v) is bool)
            bad = first_bool if bad < 0 else min(bad, first_bool)
        if bad >= 0:
            got = [0 if g is None else g for g in got]
        return np.fromiter(got, dtype=np.int32, count=len(got)), bad


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


class Featurizer:
    """Validate and featurize examples of one model into a :class:`Batch`.

    Named features are hashed with ``mmh3.hash(name, seed=0, signed=True)`` into
    ``2**bits`` buckets (bucket ``abs(h) % 2**bits``, value negated when ``h < 0``), or, with
    ``hashing: false``, read as integer indices ``0 <= i < dim``. Text goes through
    :class:`~service.learning.text.TextFeaturizer` and is hashed with the ``"w:"``/``"c:"``
    prefixes (optionally L2-normalised on its own). Quadratic pairs ``(a, b)`` add, for every
    named feature ``"a:…"`` and ``"b:…"`` of an example, a feature with value ``va·vb`` whose
    hash mixes the two hashes (VW's ``-q``; for ``a == b`` each unordered pair once). Named and
    dense values may first go through ``transform`` (``"log1p"``, see :data:`TRANSFORMS`). Then
    duplicate buckets are summed, zeros dropped, and ``normalize`` scales every row to unit
    L2 norm.

    Speed: name → hash is cached in a bounded dict, and values are validated with numpy over
    the whole batch after one pass over the examples; the CSR assembly is compiled.

    >>> from types import SimpleNamespace as NS
    >>> spec = NS(dim=8, hashing=False, classes=(-1, 1), positive=1, text=None,
    ...           quadratic=(), normalize=False)
    >>> b = Featurizer(spec).transform([{"features": {"3": 2.0, "0": 1}, "label": 0}])
    >>> b.indices.tolist(), b.data.tolist(), b.y.tolist()
    ([0, 3], [1.0, 2.0], [0])
    """

    def __init__(
        self,
        spec: FeatureSpec,
        *,
        max_features: int = 100_000,
        max_text_chars: int = 1_000_000,
        cache_size: int = 1 << 20,
        cache_bytes: int = CACHE_BYTES,
        max_name_chars: int = MAX_NAME_CHARS,
        max_token_chars: int = MAX_TOKEN_CHARS,
        compiled_text: bool = True,
    ) -> None:
        for name, value in (
            ("max_features", max_features),
            ("max_text_chars", max_text_chars),
            ("cache_size", cache_size),
            ("cache_bytes", cache_bytes),
            ("max_name_chars", max_name_chars),
            ("max_token_chars", max_token_chars),
        ):
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        self.dim = int(spec.dim)
        self.hashing = bool(spec.hashing)
        if self.hashing and self.dim & (self.dim - 1):
            raise ValueError(f"dim must be a power of two when hashing, got {self.dim}")
        self.labels = Labels(spec.classes, spec.positive)
        self.normalize = bool(spec.normalize)
        self.value_transform = getattr(spec, "transform", "none")
        if self.value_transform not in TRANSFORMS:
            raise ValueError(
                f"transform must be one of {list(TRANSFORMS)}, got {self.value_transform!r}"
            )
        self._log1p = self.value_transform == "log1p"
        self.max_features = max_features
        self.max_text_chars = max_text_chars
        self.cache_size = cache_size
        self.cache_bytes = cache_bytes
        self.max_name_chars = max_name_chars
        self.max_token_chars = max_token_chars
        self._cached = 0  # bytes charged to the caches since they last started over
        self.compiled_text = bool(compiled_text)
        self._codes: dict[Any, int] = {}
        self._schemas: dict[tuple[Any, ...], np.ndarray] = {}
        self._layouts: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray, Any, np.ndarray]] = {}
        self._wcodes: dict[str, int] = {}
        self._ccodes: dict[str, int] = {}
        self._xcodes: dict[str, int] = {}
        text = spec.text
        self._text_normalize = bool(text.normalize) if text is not None else False
        self._text = (
            TextFeaturizer(
                word_ngrams=text.word_ngrams,
                char_ngrams=text.char_ngrams,
                binary=text.binary,
                char_limit=getattr(text, "char_limit", None),
                email=getattr(text, "email", False),
                tokens=getattr(text, "tokens", ()),
            )
            if text is not None
            else None
        )
        self._quadratic = tuple((str(a), str(b)) for a, b in spec.quadratic)
        if (self._text is not None or self._quadratic) and not self.hashing:
            raise ValueError("text and quadratic features need hashing")
        self._groups = sorted({g for pair in self._quadratic for g in pair})
        self._group_of: dict[Any, int] = {}

    # -- labels -------------------------------------------------------------------------------
    @property
    def n_classes(self) -> int:
        return self.labels.n_classes

    def label_index(self, value: Any) -> int:
        """Class index of a label as a client writes it (``ValueError`` if unknown)."""
        return self.labels.index(value)

    def label_name(self, index: int) -> Any:
        """The label as declared in the spec for a class index."""
        return self.labels.name(index)

    # -- the batch path -------------------------------------------------------------------------
    def transform_one(self, example: Mapping[str, Any], *, labels: bool = False) -> Batch:
        """One example as a batch of one."""
        return self.transform([example], labels=labels)

    def transform(self, examples: Sequence[Mapping[str, Any]], *, labels: bool = True) -> Batch:
        """Validate and featurize a batch; ``InvalidExample`` names the first bad example."""
        n = len(examples)
        schemas: list[tuple[Any, ...]] = []  # the names of each example's named features
        values: list[Any] = []
        ends_list: list[int] = []  # end of each example's named features in `values`
        dense_rows: list[int] = []
        dense_vals: list[Any] = []
        text_rows: list[int] = []
        texts: list[str] = []
        labs: list[Any] = []
        error: InvalidExample | None = None
        dim = self.dim
        max_text = self.max_text_chars
        allowed = ALLOWED_KEYS
        for i, ex in enumerate(examples):
            if type(ex) is not dict and not isinstance(ex, Mapping):
                error = InvalidExample(
                    f"an example must be an object, got {type(ex).__name__}", field=None, index=i
                )
                n = i
                break
            if not ex.keys() <= allowed:
                unknown = sorted(str(k) for k in ex.keys() - allowed)
                error = InvalidExample(
                    f"unknown key(s) {unknown} in example (allowed: features, id, label, text)",
                    field=unknown[0],
                    index=i,
                )
                n = i
                break
            f = ex.get("features")
            if f is not None:
                tf = type(f)
                if tf is dict:
                    schemas.append(tuple(f))
                    values.extend(f.values())
                elif tf is list:
                    if len(f) != dim:
                        error = InvalidExample(
                            f"a dense feature list must have length dim={dim}, got {len(f)}",
                            field="features",
                            index=i,
                        )
                        n = i
                        break
                    schemas.append(())  # schemas stay one per example (error indices)
                    dense_rows.append(i)
                    dense_vals.extend(f)
                elif isinstance(f, Mapping):
                    schemas.append(tuple(f))
                    values.extend(f.values())
                else:
                    error = InvalidExample(
                        f"features must be an object or a list, got {tf.__name__}",
                        field="features",
                        index=i,
                    )
                    n = i
                    break
            else:
                schemas.append(())
            ends_list.append(len(values))
            t = ex.get("text")
            if t is not None:
                if type(t) is not str:
                    error = InvalidExample(
                        f"text must be a string, got {type(t).__name__}", field="text", index=i
                    )
                    n = i
                    break
                if len(t) > max_text:
                    error = InvalidExample(
                        f"text has {len(t)} characters, more than max_text_chars={max_text}",
                        field="text",
                        index=i,
                    )
                    n = i
                    break
                if self._text is None:
                    error = InvalidExample(
                        "this model has no text featurizer", field="text", index=i
                    )
                    n = i
                    break
                text_rows.append(i)
                texts.append(t)
            if "id" in ex:
                ident = ex["id"]
                if type(ident) is not str and (type(ident) is not int):
                    error = InvalidExample(
                        f"id must be a string or an integer, got {type(ident).__name__}",
                        field="id",
                        index=i,
                    )
                    n = i
                    break
            if labels:
                labs.append(ex.get("label", _MISSING))
        ends = np.array(ends_list[:n], dtype=np.int64)
        # The examples before a structural error are checked first: an error among them is
        # the first bad example and wins.
        batch = self._build(
            n,
            schemas,
            values,
            ends,
            dense_rows,
            dense_vals,
            text_rows,
            texts,
            labs if labels else None,
        )
        if error is not None:
            raise error
        return batch

    # -- pieces ---------------------------------------------------------------------------------
    def _build(
        self,
        n: int,
        schemas: list[tuple[Any, ...]],
        values: list[Any],
        ends: np.ndarray,
        dense_rows: list[int],
        dense_vals: list[Any],
        text_rows: list[int],
        texts: list[str],
        labs: list[Any] | None,
    ) -> Batch:
        errors: list[InvalidExample] = []
        # labels
        if labs is not None:
            y, bad = self.labels.indices(labs)
            if bad >= 0:
                v = labs[bad]
                msg = (
                    "label is missing"
                    if v is _MISSING
                    else f"label {v!r} is not one of the classes "
                    f"{[self.labels.name(k) for k in range(self.n_classes)]!r}"
                )
                errors.append(InvalidExample(msg, field="label", index=bad))
        else:
            y = np.full(n, -1, dtype=np.int32)
        # named features. Every part is (rows, codes, values): a code is a raw signed hash
        # (hashing: the kernel takes bucket abs(h) & (dim - 1) and negates when h < 0) or an
        # index >= 0 (no hashing, dense lists), which the same arithmetic leaves alone.
        rows_parts: list[np.ndarray] = []
        cols_parts: list[np.ndarray] = []
        vals_parts: list[np.ndarray] = []
        if values:
            one = (
                not dense_rows
                and not texts
                and not self._quadratic
                and schemas.count(schemas[0]) == n
                and 0 < len(schemas[0]) <= self.max_features
            )
            codes = self._lookup(schemas[:1] if one else schemas, errors)
            vals = _to_float(values, ends, errors, lambda p: _field(_flat(schemas)[p]))
            if vals is not None and self._log1p:
                vals = np.copysign(np.log1p(np.abs(vals)), vals)
            if one and codes is not None and vals is not None and not errors:
                return self._one_schema(schemas[0], vals, n, y)
            if one and codes is not None:
                codes = np.tile(codes, n)
            if codes is not None and vals is not None:
                rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(ends, prepend=0))
                rows_parts.append(rows)
                cols_parts.append(codes)
                vals_parts.append(vals)
                if self._quadratic:
                    self._add_quadratic(
                        _flat(schemas), rows, codes, vals, n, rows_parts, cols_parts, vals_parts
                    )
        # dense features
        if dense_rows:
            dim = self.dim
            dense_ends = np.arange(1, len(dense_rows) + 1, dtype=np.int64) * dim
            dvals = _to_float(
                dense_vals,
                dense_ends,
                errors,
                lambda p: f"features[{p % dim}]",
                row_of=np.asarray(dense_rows, dtype=np.int64),
            )
            if dvals is not None:
                if self._log1p:
                    dvals = np.copysign(np.log1p(np.abs(dvals)), dvals)
                rows_parts.append(np.repeat(np.asarray(dense_rows, dtype=np.int64), dim))
                cols_parts.append(np.tile(np.arange(dim, dtype=np.int64), len(dense_rows)))
                vals_parts.append(dvals)
        # text
        if texts:
            bad = _first_unencodable(texts)
            if bad >= 0:
                errors.append(
                    InvalidExample(
                        "text is not valid Unicode (it holds a lone surrogate)",
                        field="text",
                        index=text_rows[bad],
                    )
                )
            else:
                got = self._text_features(text_rows, texts, errors)
                if got is not None:
                    rows_parts.append(got[0])
                    cols_parts.append(got[1])
                    vals_parts.append(got[2])
        if errors:
            raise min(errors, key=lambda e: e.index if e.index is not None else -1)
        if len(rows_parts) == 1:
            rows, codes, vals = rows_parts[0], cols_parts[0], vals_parts[0]
        elif rows_parts:
            rows = np.concatenate(rows_parts)
            codes = np.concatenate(cols_parts)
            vals = np.concatenate(vals_parts)
        else:
            rows = np.zeros(0, dtype=np.int64)
            codes = np.zeros(0, dtype=np.int64)
            vals = np.zeros(0, dtype=np.float64)
        mask = self.dim - 1 if self.hashing else (1 << 62) - 1
        indptr, indices, data, most = _assemble(
            rows, codes, vals, n, mask, self.normalize, self.max_features
        )
        if most >= 0:
            count = int(np.count_nonzero(rows == most))
            raise InvalidExample(
                f"example has {count} features, more than max_features={self.max_features}",
                field="features",
                index=most,
            )
        return Batch(indptr, indices, data, y)

    def _one_schema(self, key: tuple[Any, ...], vals: np.ndarray, n: int, y: np.ndarray) -> Batch:
        """The common case — every example has the same names in the same order — without
        the general assembly: the schema's column order, signs and collisions are computed
        once and cached, and a batch is a reshape, a gather and a mask."""
        info = self._layouts.get(key)
        if info is None:
            if len(self._layouts) > SCHEMA_CACHE_SIZE:
                self._layouts.clear()
            codes = self._schemas.get(key)
            if codes is None:  # cleared meanwhile (the caches are bounded): recompute
                codes = self._schema_codes(key)
            mask = self.dim - 1 if self.hashing else (1 << 62) - 1
            cols = np.abs(codes) & mask
            signs = np.where(codes < 0, -1.0, 1.0)
            order = np.argsort(cols, kind="stable")
            sorted_cols = cols[order]
            first = np.concatenate(([True], sorted_cols[1:] != sorted_cols[:-1]))
            starts = None if first.all() else np.flatnonzero(first)
            unique_cols = sorted_cols[first].astype(np.int32)
            info = (order, signs[order], starts, unique_cols)
            self._charge(sum(x.nbytes for x in info if x is not None) + 200)
            self._layouts[key] = info
        order, signs, starts, unique_cols = info
        V = vals.reshape(n, -1)[:, order] * signs
        if starts is not None:  # hash collisions inside the schema: sum them
            V = np.add.reduceat(V, starts, axis=1)
        if self.normalize:
            norms = np.sqrt(np.einsum("ij,ij->i", V, V))
            np.divide(V, norms[:, None], out=V, where=norms[:, None] > 0)
        keep = V != 0.0
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.count_nonzero(keep, axis=1), out=indptr[1:])
        indices = np.broadcast_to(unique_cols, V.shape)[keep]
        return Batch(indptr, indices, V[keep], y)

    def _lookup(
        self, schemas: list[tuple[Any, ...]], errors: list[InvalidExample]
    ) -> np.ndarray | None:
        """Codes of the names: raw signed hash (hashing) or the index (no hashing).

        Most streams repeat one schema (the same names in the same order) example after
        example, so the codes are cached per *tuple of names* first and per name second: a
        hit costs one tuple hash instead of a dict lookup per feature.
        """
        known = self._schemas
        try:
            arrays = [known[k] for k in schemas]
        except KeyError:
            if len(known) > SCHEMA_CACHE_SIZE:
                known.clear()
            arrays = []
            for i, k in enumerate(schemas):
                a = known.get(k)
                if a is None:
                    try:
                        a = self._schema_codes(k)
                    except _BadName as e:
                        errors.append(InvalidExample(e.msg, field=_field(e.name), index=i))
                        return None
                    self._charge(_tuple_bytes(k) + a.nbytes)
                    known[k] = a
                arrays.append(a)
        return np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)

    def _schema_codes(self, names: tuple[Any, ...]) -> np.ndarray:
        cache = self._codes
        if len(cache) > self.cache_size:
            cache.clear()
        out = np.empty(len(names), dtype=np.int64)
        for t, name in enumerate(names):
            code = cache.get(name)
            if code is None:
                try:
                    code = self._code(name)
                except ValueError as e:
                    raise _BadName(name, str(e)) from None
                self._charge(sys.getsizeof(name) + _ENTRY_BYTES)
                cache[name] = code
            out[t] = code
        return out

    def _code(self, name: Any) -> int:
        if type(name) is str and len(name) > self.max_name_chars:
            raise ValueError(
                f"a feature name has {len(name)} characters, more than "
                f"max_name_chars={self.max_name_chars}"
            )
        if self.hashing:
            if type(name) is not str:
                raise ValueError(f"feature names must be strings, got {name!r}")
            # hashed as UTF-8 bytes (the same hash as the str): a lone surrogate is a
            # UnicodeEncodeError (a ValueError) here, not a crash inside mmh3
            return int(mmh3.hash(name.encode("utf-8"), 0, signed=True))
        if type(name) is int:
            idx = name
        elif type(name) is str and name.isascii() and name.isdigit():
            idx = int(name)
        else:
            raise ValueError(
                f"without hashing a feature name must be an integer index, got {name!r}"
            )
        if not 0 <= idx < self.dim:
            raise ValueError(f"feature index {idx} is out of range 0..{self.dim - 1}")
        return idx

    def _text_features(
        self, text_rows: list[int], texts: list[str], errors: list[InvalidExample]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(rows, codes, values) of the texts: per text, the body's ``w:`` then ``c:`` names,
        then the e-mail header and special-token names, each distinct name once (the order
        :meth:`TextFeaturizer.features` gives)."""
        tf = self._text
        assert tf is not None
        bodies = texts
        extra: list[dict[str, int]] = []
        if tf.has_extras:
            split = [tf.extras(t) for t in texts]
            bodies = [body for body, _ in split]
            extra = [names for _, names in split]
        normalised = self._text_normalize and not extra  # the kernel can do it alone
        if self.compiled_text:
            c, v, counts, bad = text_grams(bodies, tf.word_ngrams, tf.char_ngrams, tf.char_limit,
                                           tf.binary, normalised, self.max_token_chars)  # fmt: skip
        else:
            c, v, counts, bad = self._python_grams(bodies)
            normalised = False
        if bad >= 0:
            errors.append(
                InvalidExample(
                    f"text has a word of more than max_token_chars={self.max_token_chars} "
                    "characters",
                    field="text",
                    index=text_rows[bad],
                )
            )
            return None
        rows = np.repeat(np.asarray(text_rows, dtype=np.int64), counts)
        if extra:
            xc, xv, xn = self._hash_names(extra, self._xcodes)
            xrows = np.repeat(np.asarray(text_rows, dtype=np.int64), xn)
            rows = np.concatenate([rows, xrows])
            c = np.concatenate([c, xc])
            v = np.concatenate([v, xv])
            counts = np.concatenate([counts, xn])
        if self._text_normalize and not normalised and v.size:
            local = np.repeat(np.tile(np.arange(len(texts)), len(counts) // len(texts)), counts)
            norms = np.sqrt(np.bincount(local, weights=v * v, minlength=len(texts)))
            v = v / norms[local]
        return rows, c, v

    def _python_grams(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """The reference of the compiled path: tokens in Python, names hashed through the
        caches (``compiled_text=False``)."""
        assert self._text is not None
        longest = self.max_token_chars
        for k, t in enumerate(texts):
            if max(map(len, WORD_RE.findall(t.lower())), default=0) > longest:
                return np.zeros(0, np.int64), np.zeros(0), np.zeros(len(texts), np.int64), k
        tok = self._text.tokens
        pairs = [tok(t) for t in texts]
        wc, wv, wn = self._hash_names([w for w, _ in pairs], self._wcodes, "w:")
        cc, cv, cn = self._hash_names([c for _, c in pairs], self._ccodes, "c:")
        # per text: its words, then its characters
        order = np.argsort(
            np.concatenate([np.repeat(np.arange(len(texts)) * 2, wn),
                            np.repeat(np.arange(len(texts)) * 2 + 1, cn)]),
            kind="stable",
        )  # fmt: skip
        return np.concatenate([wc, cc])[order], np.concatenate([wv, cv])[order], wn + cn, -1

    def _hash_names(
        self, per_text: list[dict[str, int]], cache: dict[str, int], prefix: str = ""
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(codes, values, per-text counts) of ``prefix + name`` for each text's names, with
        name → hash cached in ``cache`` (cleared when it passes its bound)."""
        if len(cache) > self.cache_size:
            cache.clear()
        codes: list[int] = []
        vals: list[int] = []
        counts = np.empty(len(per_text), dtype=np.int64)
        hash_ = mmh3.hash
        for k, grams in enumerate(per_text):
            counts[k] = len(grams)
            if not grams:
                continue
            try:
                codes.extend(list(map(cache.__getitem__, grams)))  # all or nothing
            except KeyError:
                for g in grams:
                    h = cache.get(g)
                    if h is None:
                        h = cache[g] = hash_(prefix + g, 0, signed=True)
                        self._charge(sys.getsizeof(g) + _ENTRY_BYTES)
                    codes.append(h)
            vals.extend(grams.values())
        return (
            np.fromiter(codes, dtype=np.int64, count=len(codes)),
            np.fromiter(vals, dtype=np.float64, count=len(vals)),
            counts,
        )

    def _add_quadratic(
        self,
        names: list[Any],
        rows: np.ndarray,
        codes: np.ndarray,
        vals: np.ndarray,
        n: int,
        rows_parts: list[np.ndarray],
        cols_parts: list[np.ndarray],
        vals_parts: list[np.ndarray],
    ) -> None:
        group_of = self._group_of
        if len(group_of) > self.cache_size:
            group_of.clear()
        index = {g: k for k, g in enumerate(self._groups)}
        new = set(names).difference(group_of)
        if new:  # charged first: a charge past the bound clears group_of, then all are new
            self._charge(sum(sys.getsizeof(name) + _ENTRY_BYTES for name in new))
            for name in set(names).difference(group_of):
                group_of[name] = index.get(str(name).partition(":")[0], -1) if ":" in name else -1
        grp = np.fromiter(map(group_of.__getitem__, names), dtype=np.int64, count=len(names))
        pos = np.arange(len(names), dtype=np.int64)
        for a, b in self._quadratic:
            ia, ib = np.flatnonzero(grp == index[a]), np.flatnonzero(grp == index[b])
            if ia.size == 0 or ib.size == 0:
                continue
            ra, rb = rows[ia], rows[ib]
            cb = np.bincount(rb, minlength=n)
            startb = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(cb)[:-1]])
            reps = cb[ra]
            total = int(reps.sum())
            if total == 0:
                continue
            ea = np.repeat(ia, reps)
            within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
            eb = ib[np.repeat(startb[ra], reps) + within]
            ha, hb = codes[ea], codes[eb]
            if a == b:
                keep = pos[ea] < pos[eb]
                ea, eb, ha, hb = ea[keep], eb[keep], ha[keep], hb[keep]
                ha, hb = np.minimum(ha, hb), np.maximum(ha, hb)
            rows_parts.append(rows[ea])
            cols_parts.append(_mix(ha, hb))
            vals_parts.append(vals[ea] * vals[eb])

    def _charge(self, nbytes: int) -> None:
        """Count ``nbytes`` more held by the caches; past ``cache_bytes`` they all start over
        (the entry being added then goes into the fresh caches)."""
        self._cached += nbytes
        if self._cached > self.cache_bytes:
            for cache in (self._codes, self._schemas, self._layouts, self._wcodes,
                          self._ccodes, self._xcodes, self._group_of):  # fmt: skip
                cache.clear()
            self._cached = nbytes

    @property
    def cached_bytes(self) -> int:
        """Bytes the caches hold now, as counted against ``cache_bytes``."""
        return self._cached


_ENTRY_BYTES = 100
"""What a dict entry costs besides its key: the slot, the hash, the int value."""


def _tuple_bytes(names: tuple[Any, ...]) -> int:
    return sys.getsizeof(names) + sum(map(sys.getsizeof, names))


def _field(name: Any) -> str:
    """``features.<name>`` for an error, the name cut to :data:`FIELD_NAME_CHARS`."""
    text = str(name)
    if len(text) > FIELD_NAME_CHARS:
        text = text[:FIELD_NAME_CHARS] + "…"
    return f"features.{text}"


class _BadName(Exception):
    def __init__(self, name: Any, msg: str) -> None:
        self.name, self.msg = name, msg


def _first_unencodable(texts: list[str]) -> int:
    """Index of the first text that is not valid UTF-8 (a lone surrogate, which JSON's
    ``\\ud800`` can carry), or -1."""
    try:
        "".join(texts).encode("utf-8")
    except UnicodeEncodeError:
        for k, t in enumerate(texts):
            try:
                t.encode("utf-8")
            except UnicodeEncodeError:
                return k
    return -1


def _flat(schemas: list[tuple[Any, ...]]) -> list[Any]:
    return [name for names in schemas for name in names]


def _mix(ha: np.ndarray, hb: np.ndarray) -> np.ndarray:
    """A signed 32-bit hash of a pair of signed 32-bit hashes (VW's FNV-style mix)."""
    ua = (ha & 0xFFFFFFFF).astype(np.uint32)
    ub = (hb & 0xFFFFFFFF).astype(np.uint32)
    mixed = (ua * np.uint32(16777619)) ^ ub
    return mixed.view(np.int32).astype(np.int64)


def _to_float(
    values: list[Any],
    ends: np.ndarray,
    errors: list[InvalidExample],
    field_of: Callable[[int], str],
    row_of: np.ndarray | None = None,
) -> np.ndarray | None:
    """Values as float64, checking types, finiteness and range over the whole batch at once."""

    def fail(pos: int, msg: str) -> None:
        k = int(np.searchsorted(ends, pos, side="right"))
        row = int(row_of[k]) if row_of is not None else k
        errors.append(InvalidExample(msg, field=field_of(pos), index=row))

    def first_non_number() -> int | None:
        for pos, v in enumerate(values):
            if type(v) is bool or not isinstance(v, int | float):
                fail(pos, f"a feature value must be a number, got {v!r}")
                return pos
        return None

    # array('d') converts in C and refuses strings, None, lists…; only bools (ints to it) and
    # ints beyond the float range get through or fail differently. A bool can only have
    # become 0.0 or 1.0, so only those positions need their Python type looked at.
    try:
        arr = np.frombuffer(array("d", values), dtype=np.float64)
    except TypeError:
        if first_non_number() is None:  # an exotic number type: the general conversion
            arr = np.array(values, dtype=np.float64)
        else:
            return None
    except OverflowError:
        pos = next(p for p, v in enumerate(values) if isinstance(v, int) and abs(v) > 1e300)
        fail(pos, f"feature value {values[pos]} is out of range (|v| <= {MAX_ABS_VALUE:g})")
        return None
    suspects = np.flatnonzero((arr == 0.0) | (arr == 1.0))
    if suspects.size:
        picked = (
            itemgetter(*suspects.tolist())(values) if suspects.size > 1 else [values[suspects[0]]]
        )
        if bool in set(map(type, picked)):
            first_non_number()
            return None
    bad = ~(np.abs(arr) <= MAX_ABS_VALUE)
    if bad.any():
        pos = int(np.argmax(bad))
        fail(pos, f"feature value {values[pos]!r} is not finite or |v| > {MAX_ABS_VALUE:g}")
        return None
    return arr


@njit(cache=True, nogil=True)
def _same(c: np.ndarray, a: int, b: int, m: int) -> bool:
    """``c[a:a+m] == c[b:b+m]``, element by element (a loop numba compiles)."""
    for t in range(m):  # noqa: SIM110 - numba compiles the loop, not a generator
        if c[a + t] != c[b + t]:
            return False
    return True


@njit(cache=True, nogil=True)
def _stable_order(c: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The positions ``0..hi-lo-1`` ordered by column ``c[lo + t]`` (all >= 0), equal columns
    in position order: an insertion sort for short rows, else an LSD radix sort on bytes of
    the column (stable, so duplicates are later summed in the order they came)."""
    n = hi - lo
    order = np.arange(n)
    if n <= 24:
        for t in range(1, n):
            x = order[t]
            key = c[lo + x]
            u = t - 1
            while u >= 0 and c[lo + order[u]] > key:
                order[u + 1] = order[u]
                u -= 1
            order[u + 1] = x
        return order
    top = 0
    for t in range(n):
        top = max(top, c[lo + t])
    tmp = np.empty(n, dtype=np.int64)
    cnt = np.empty(257, dtype=np.int64)
    shift = 0
    while (top >> shift) > 0:
        cnt[:] = 0
        for t in range(n):
            cnt[((c[lo + order[t]] >> shift) & 255) + 1] += 1
        for d in range(256):
            cnt[d + 1] += cnt[d]
        for t in range(n):
            x = order[t]
            d = (c[lo + x] >> shift) & 255
            tmp[cnt[d]] = x
            cnt[d] += 1
        order, tmp = tmp, order
        shift += 8
    return order


@njit(cache=True, nogil=True)
def _assemble(
    rows: np.ndarray,
    codes: np.ndarray,
    vals: np.ndarray,
    n: int,
    mask: int,
    normalize: bool,
    max_features: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(row, code, value) triplets → CSR with sorted unique columns, duplicates summed, zeros
    dropped, optionally each row scaled to unit L2 norm. Column ``abs(code) & mask``, value
    negated when ``code < 0``. The last result is the first row with more than
    ``max_features`` entries (then the CSR arrays are empty), or -1.

    Linear in nnz plus a small stable sort per row whose columns are not already increasing; a row
    with the same column sequence as the row before (one schema, example after example)
    reuses that row's order instead of sorting again.
    """
    nnz = rows.shape[0]
    start = np.zeros(n + 1, dtype=np.int64)
    for k in range(nnz):
        start[rows[k] + 1] += 1
    for i in range(n):
        if start[i + 1] > max_features:
            z = np.zeros(0, dtype=np.int64)
            return z, z.astype(np.int32), z.astype(np.float64), i
        start[i + 1] += start[i]
    fill = start[:-1].copy()
    c2 = np.empty(nnz, dtype=np.int64)
    v2 = np.empty(nnz, dtype=np.float64)
    for k in range(nnz):
        r = rows[k]
        p = fill[r]
        code = codes[k]
        if code < 0:
            c2[p] = (-code) & mask
            v2[p] = -vals[k]
        else:
            c2[p] = code & mask
            v2[p] = vals[k]
        fill[r] = p + 1
    indptr = np.zeros(n + 1, dtype=np.int64)
    out_i = np.empty(nnz, dtype=np.int32)
    out_v = np.empty(nnz, dtype=np.float64)
    m = 0
    order = np.zeros(0, dtype=np.int64)
    plo = 0
    phi = 0
    for i in range(n):
        lo = start[i]
        hi = start[i + 1]
        ordered = True
        for k in range(lo + 1, hi):
            if c2[k] <= c2[k - 1]:
                ordered = False
                break
        if ordered:
            order = np.arange(hi - lo)
        elif not (hi - lo == phi - plo and _same(c2, lo, plo, hi - lo)):
            order = _stable_order(c2, lo, hi)
        plo = lo
        phi = hi
        first = m
        prev = -1
        for t in range(hi - lo):
            j = lo + order[t]
            c = c2[j]
            if c == prev:
                out_v[m - 1] += v2[j]
            else:
                out_i[m] = c
                out_v[m] = v2[j]
                m += 1
                prev = c
        w = first
        for t in range(first, m):
            if out_v[t] != 0.0:
                out_i[w] = out_i[t]
                out_v[w] = out_v[t]
                w += 1
        m = w
        if normalize:
            s = 0.0
            for t in range(first, m):
                s += out_v[t] * out_v[t]
            if s > 0.0:
                s = np.sqrt(s)
                for t in range(first, m):
                    out_v[t] /= s
        indptr[i + 1] = m
    return indptr, out_i[:m].copy(), out_v[:m].copy(), -1
