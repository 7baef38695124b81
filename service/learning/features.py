"""The featurizer: examples (JSON-like mappings) → a validated :class:`Batch`.

The featurizer is the one validator of examples: an example is checked here, whichever route
it came by. It trusts its spec (a :class:`~service.learning.spec.ModelSpec` is validated by
``ModelSpec.from_dict``) and checks only its own limits. Labels are in
:mod:`service.learning.labels`, value checks in :mod:`service.learning.values`, the text and
quadratic parts in :mod:`service.learning._hashing`, the CSR assembly in
:mod:`service.learning.batch`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from service.errors import EmptyExample, InvalidExample, TextTooLong
from service.learning._hashing import Crosses, HashedText, NameCaches, NamedCodes
from service.learning.batch import Batch, assemble
from service.learning.labels import Labels
from service.learning.text import TextFeaturizer
from service.learning.values import MAX_FEATURES, feature_field, first_unencodable, to_float

__all__ = ["ALLOWED_KEYS", "TRANSFORMS", "Batch", "FeatureSpec", "Featurizer"]
# Batch is re-exported for the callers not yet moved to service.learning.batch (service/store).

ALLOWED_KEYS = frozenset({"features", "text", "label", "id", "meta"})
"""The keys of an example; ``meta`` (any JSON, the caller's own fields) is ignored."""

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
    @property
    def char_limit(self) -> int | None: ...
    @property
    def email(self) -> bool: ...
    @property
    def tokens(self) -> tuple[str, ...]: ...


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


class Featurizer:
    """Validate and featurize examples of one model into a :class:`Batch`.

    Named features are hashed with ``mmh3.hash(name, seed=0, signed=True)`` into
    ``2**bits`` buckets (bucket ``abs(h) % 2**bits``, value negated when ``h < 0``), or, with
    ``hashing: false``, read as integer indices ``0 <= i < dim``. Text goes through
    :class:`~service.learning.text.TextFeaturizer` and is hashed with the ``"w:"``/``"c:"``
    prefixes (optionally L2-normalised on its own). Quadratic pairs ``(a, b)`` cross the named
    features ``"a:…"`` × ``"b:…"`` (:class:`~service.learning._hashing.Crosses`). Named and
    dense values may first go through ``transform`` (``"log1p"``, see :data:`TRANSFORMS`). Then
    duplicate buckets are summed, zeros dropped, and ``normalize`` scales every row to unit
    L2 norm.

    Speed: name → hash is cached in bounded dicts, and values are validated with numpy over
    the whole batch after one pass over the examples; the CSR assembly is compiled.

    >>> from types import SimpleNamespace as NS
    >>> spec = NS(dim=8, hashing=False, classes=(-1, 1), positive=1, text=None,
    ...           quadratic=(), normalize=False, transform="none")
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
        if max_features > MAX_FEATURES:
            raise ValueError(f"max_features must be <= {MAX_FEATURES:.3g}, got {max_features}")
        self.dim = int(spec.dim)
        self.hashing = bool(spec.hashing)
        self.labels = Labels(spec.classes, spec.positive)
        self.normalize = bool(spec.normalize)
        self.value_transform = spec.transform
        self._log1p = self.value_transform == "log1p"
        self.max_features = max_features
        self.max_text_chars = max_text_chars
        self.cache_size = cache_size
        self.cache_bytes = cache_bytes
        self.max_name_chars = max_name_chars
        self.max_token_chars = max_token_chars
        self.compiled_text = bool(compiled_text)
        self._caches = NameCaches(cache_size, cache_bytes)
        self._codes = NamedCodes(
            self._caches, dim=self.dim, hashing=self.hashing, max_name_chars=max_name_chars
        )
        text = spec.text
        self._text = (
            HashedText(
                TextFeaturizer(
                    word_ngrams=text.word_ngrams,
                    char_ngrams=text.char_ngrams,
                    binary=text.binary,
                    char_limit=text.char_limit,
                    email=text.email,
                    tokens=text.tokens,
                ),
                self._caches,
                normalize=bool(text.normalize),
                compiled=self.compiled_text,
                max_token_chars=max_token_chars,
            )
            if text is not None
            else None
        )
        pairs = tuple((str(a), str(b)) for a, b in spec.quadratic)
        self._crosses = Crosses(pairs, self._caches) if pairs else None

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

    @property
    def cached_bytes(self) -> int:
        """Bytes the caches hold now, as counted against ``cache_bytes``."""
        return self._caches.held

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
        check = self._check
        for i, ex in enumerate(examples):
            error = check(ex, i)
            if error is not None:
                n = i
                break
            f = ex.get("features")
            if f is None:
                schemas.append(())
            elif type(f) is list:
                schemas.append(())  # schemas stay one per example (error indices)
                dense_rows.append(i)
                dense_vals.extend(f)
            else:
                schemas.append(tuple(f))
                values.extend(f.values())
            ends_list.append(len(values))
            t = ex.get("text")
            if t is not None:
                text_rows.append(i)
                texts.append(t)
            if labels:
                labs.append(ex.get("label", _MISSING))
        ends = np.array(ends_list, dtype=np.int64)
        # The examples before a structural error are checked first: an error among them is
        # the first bad example and wins.
        batch = self._build(
            n, schemas, values, ends, dense_rows, dense_vals, text_rows, texts,
            labs if labels else None,
        )  # fmt: skip
        if error is not None:
            raise error
        return batch

    def _check(self, ex: Any, i: int) -> InvalidExample | None:
        """The structural error of example ``i`` (its shape and types), or None; its values,
        names and label are checked over the whole batch by :meth:`_build`."""
        if type(ex) is not dict and not isinstance(ex, Mapping):
            return InvalidExample(
                f"an example must be an object, got {type(ex).__name__}", field=None, index=i
            )
        if not ex.keys() <= ALLOWED_KEYS:
            unknown = sorted(str(k) for k in ex.keys() - ALLOWED_KEYS)
            return InvalidExample(
                f"unknown key(s) {unknown} in example (allowed: features, id, label, meta, text)",
                field=unknown[0],
                index=i,
            )
        f = ex.get("features")
        t = ex.get("text")
        if f is not None and type(f) is not dict:
            if type(f) is list:
                if len(f) != self.dim:
                    return InvalidExample(
                        f"a dense feature list must have length dim={self.dim}, got {len(f)}",
                        field="features",
                        index=i,
                    )
            elif not isinstance(f, Mapping):
                return InvalidExample(
                    f"features must be an object or a list, got {type(f).__name__}",
                    field="features",
                    index=i,
                )
        elif f is None and t is None:
            return EmptyExample(
                "an example needs features or text (or both); this one has neither "
                '(an explicit "features": {} is a bias-only example)',
                field="features",
                index=i,
            )
        if t is not None:
            if type(t) is str and len(t) > self.max_text_chars:
                return TextTooLong(
                    f"text has {len(t)} characters, more than max_text_chars={self.max_text_chars}",
                    field="text",
                    index=i,
                )
            if type(t) is not str:
                msg = f"text must be a string, got {type(t).__name__}"
            elif self._text is None:
                msg = ('this model has no text featurizer (it was created with "text": false '
                       "or without hashing)")  # fmt: skip
            else:
                msg = ""
            if msg:
                return InvalidExample(msg, field="text", index=i)
        if "id" in ex and type(ex["id"]) is not str and type(ex["id"]) is not int:
            return InvalidExample(
                f"id must be a string or an integer, got {type(ex['id']).__name__}",
                field="id",
                index=i,
            )
        return None

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
        # Every part is (rows, codes, values): a code is a raw signed hash (hashing: the
        # assembly takes bucket abs(h) & (dim - 1) and negates when h < 0) or an index >= 0
        # (no hashing, dense lists), which the same arithmetic leaves alone.
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        # named features
        if values:
            one = (
                not dense_rows
                and not texts
                and self._crosses is None
                and schemas.count(schemas[0]) == n
                and 0 < len(schemas[0]) <= self.max_features
            )
            codes = self._codes.lookup(schemas[:1] if one else schemas, errors)
            vals = to_float(values, ends, errors, lambda p: feature_field(_flat(schemas)[p]))
            if vals is not None and self._log1p:
                vals = np.copysign(np.log1p(np.abs(vals)), vals)
            if one and codes is not None and vals is not None and not errors:
                return self._one_schema(schemas[0], vals, n, y)
            if one and codes is not None:
                codes = np.tile(codes, n)
            if codes is not None and vals is not None:
                rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(ends, prepend=0))
                parts.append((rows, codes, vals))
                if self._crosses is not None:
                    self._crosses.add(_flat(schemas), rows, codes, vals, n, parts)
        # dense features
        if dense_rows:
            dim = self.dim
            dense_ends = np.arange(1, len(dense_rows) + 1, dtype=np.int64) * dim
            dvals = to_float(
                dense_vals,
                dense_ends,
                errors,
                lambda p: f"features[{p % dim}]",
                row_of=np.asarray(dense_rows, dtype=np.int64),
            )
            if dvals is not None:
                if self._log1p:
                    dvals = np.copysign(np.log1p(np.abs(dvals)), dvals)
                rows = np.repeat(np.asarray(dense_rows, dtype=np.int64), dim)
                parts.append(
                    (rows, np.tile(np.arange(dim, dtype=np.int64), len(dense_rows)), dvals)
                )
        # text
        if texts:
            assert self._text is not None  # _check refused text without a text featurizer
            bad = first_unencodable(texts)
            if bad >= 0:
                errors.append(
                    InvalidExample(
                        "text is not valid Unicode (it holds a lone surrogate)",
                        field="text",
                        index=text_rows[bad],
                    )
                )
            else:
                got = self._text.parts(text_rows, texts, errors)
                if got is not None:
                    parts.append(got)
        if errors:
            raise min(errors, key=lambda e: e.index if e.index is not None else -1)
        if len(parts) == 1:
            rows, codes, vals = parts[0]
        elif parts:
            rows, codes, vals = (np.concatenate(p) for p in zip(*parts, strict=True))
        else:
            rows = np.zeros(0, dtype=np.int64)
            codes = np.zeros(0, dtype=np.int64)
            vals = np.zeros(0, dtype=np.float64)
        mask = self.dim - 1 if self.hashing else (1 << 62) - 1
        indptr, indices, data, most = assemble(
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
        order, signs, starts, unique_cols = self._codes.layout(key)
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


def _flat(schemas: list[tuple[Any, ...]]) -> list[Any]:
    return [name for names in schemas for name in names]
