"""The featurizer's hashed parts: bounded name caches, named codes, text, quadratic crosses.

Every part is ``(rows, codes, values)``: a code is a raw signed 32-bit hash that the CSR
assembly (:func:`service.learning.batch.assemble`) turns into bucket ``abs(h) & (dim - 1)``,
negating the value when ``h < 0``.
"""

from __future__ import annotations

import sys
from typing import Any

import mmh3
import numpy as np

from service.errors import InvalidExample
from service.learning._textkernel import text_grams
from service.learning.text import WORD_RE, TextFeaturizer
from service.learning.values import feature_field

ENTRY_BYTES = 100
"""What a dict entry costs besides its key: the slot, the hash, the int value."""


class NameCaches:
    """The caches of one featurizer (name → hash, tuple of names → codes and layouts, text and
    e-mail/token names → hash, name → quadratic group), bounded together: past ``limit`` bytes
    charged, or past ``size`` entries in one of them, they start over."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        self.held = 0  # bytes charged since the caches last started over
        self.codes: dict[Any, int] = {}
        self.schemas: dict[tuple[Any, ...], np.ndarray] = {}
        self.layouts: dict[tuple[Any, ...], Layout] = {}
        self.words: dict[str, int] = {}
        self.chars: dict[str, int] = {}
        self.extras: dict[str, int] = {}
        self.groups: dict[Any, int] = {}

    def charge(self, nbytes: int) -> None:
        """Count ``nbytes`` more held by the caches; past ``limit`` they all start over
        (the entry being added then goes into the fresh caches)."""
        self.held += nbytes
        if self.held > self.limit:
            for cache in (self.codes, self.schemas, self.layouts, self.words, self.chars,
                          self.extras, self.groups):  # fmt: skip
                cache.clear()
            self.held = nbytes

    def hash_names(
        self, per_text: list[dict[str, int]], cache: dict[str, int], prefix: str = ""
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(codes, values, per-text counts) of ``prefix + name`` for each text's names, with
        name → hash cached in ``cache`` (cleared when it passes its bound)."""
        if len(cache) > self.size:
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
                        self.charge(sys.getsizeof(g) + ENTRY_BYTES)
                    codes.append(h)
            vals.extend(grams.values())
        return (
            np.fromiter(codes, dtype=np.int64, count=len(codes)),
            np.fromiter(vals, dtype=np.float64, count=len(vals)),
            counts,
        )


SCHEMA_CACHE_SIZE = 4096
"""How many distinct tuples of feature names the featurizer remembers (then it starts over)."""

Layout = tuple[np.ndarray, np.ndarray, Any, np.ndarray]
"""A schema's column order, signs in that order, collision starts (or None), unique columns."""


class NamedCodes:
    """Named features → codes: the raw signed hash of the name (hashing) or its integer
    index (no hashing), cached per tuple of names and per name."""

    def __init__(self, caches: NameCaches, *, dim: int, hashing: bool, max_name_chars: int) -> None:
        self.caches = caches
        self.dim = dim
        self.hashing = hashing
        self.max_name_chars = max_name_chars

    def lookup(
        self, schemas: list[tuple[Any, ...]], errors: list[InvalidExample]
    ) -> np.ndarray | None:
        """Codes of the names: raw signed hash (hashing) or the index (no hashing).

        Most streams repeat one schema (the same names in the same order) example after
        example, so the codes are cached per *tuple of names* first and per name second: a
        hit costs one tuple hash instead of a dict lookup per feature.
        """
        known = self.caches.schemas
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
                        a = self.schema_codes(k)
                    except _BadName as e:
                        errors.append(InvalidExample(e.msg, field=feature_field(e.name), index=i))
                        return None
                    self.caches.charge(_tuple_bytes(k) + a.nbytes)
                    known[k] = a
                arrays.append(a)
        return np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)

    def schema_codes(self, names: tuple[Any, ...]) -> np.ndarray:
        cache = self.caches.codes
        if len(cache) > self.caches.size:
            cache.clear()
        out = np.empty(len(names), dtype=np.int64)
        for t, name in enumerate(names):
            code = cache.get(name)
            if code is None:
                try:
                    code = self.code(name)
                except ValueError as e:
                    raise _BadName(name, str(e)) from None
                self.caches.charge(sys.getsizeof(name) + ENTRY_BYTES)
                cache[name] = code
            out[t] = code
        return out

    def code(self, name: Any) -> int:
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

    def layout(self, key: tuple[Any, ...]) -> Layout:
        """The column order, signs, collision starts and unique columns of a schema (a tuple
        of names all known to be valid), computed once and cached."""
        info = self.caches.layouts.get(key)
        if info is None:
            if len(self.caches.layouts) > SCHEMA_CACHE_SIZE:
                self.caches.layouts.clear()
            codes = self.caches.schemas.get(key)
            if codes is None:  # cleared meanwhile (the caches are bounded): recompute
                codes = self.schema_codes(key)
            mask = self.dim - 1 if self.hashing else (1 << 62) - 1
            cols = np.abs(codes) & mask
            signs = np.where(codes < 0, -1.0, 1.0)
            order = np.argsort(cols, kind="stable")
            sorted_cols = cols[order]
            first = np.concatenate(([True], sorted_cols[1:] != sorted_cols[:-1]))
            starts = None if first.all() else np.flatnonzero(first)
            unique_cols = sorted_cols[first].astype(np.int32)
            info = (order, signs[order], starts, unique_cols)
            self.caches.charge(sum(x.nbytes for x in info if x is not None) + 200)
            self.caches.layouts[key] = info
        return info


class HashedText:
    """Text → ``(rows, codes, values)``: per text, the body's ``w:`` then ``c:`` names, then
    the e-mail header and special-token names, each distinct name once (the order
    :meth:`TextFeaturizer.features` gives), optionally L2-normalised on their own."""

    def __init__(
        self,
        text: TextFeaturizer,
        caches: NameCaches,
        *,
        normalize: bool,
        compiled: bool,
        max_token_chars: int,
    ) -> None:
        self.text = text
        self.caches = caches
        self.normalize = normalize
        self.compiled = compiled
        self.max_token_chars = max_token_chars

    def parts(
        self, text_rows: list[int], texts: list[str], errors: list[InvalidExample]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The features of ``texts`` (of rows ``text_rows``), or None after adding the error
        of the first text with a word longer than ``max_token_chars``."""
        tf = self.text
        bodies = texts
        extra: list[dict[str, int]] = []
        if tf.has_extras:
            split = [tf.extras(t) for t in texts]
            bodies = [body for body, _ in split]
            extra = [names for _, names in split]
        normalised = self.normalize and not extra  # the kernel can do it alone
        if self.compiled:
            c, v, counts, bad = text_grams(bodies, tf.word_ngrams, tf.char_ngrams, tf.char_limit,
                                           tf.binary, normalised, self.max_token_chars)  # fmt: skip
        else:
            c, v, counts, bad = self.python_grams(bodies)
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
            xc, xv, xn = self.caches.hash_names(extra, self.caches.extras)
            xrows = np.repeat(np.asarray(text_rows, dtype=np.int64), xn)
            rows = np.concatenate([rows, xrows])
            c = np.concatenate([c, xc])
            v = np.concatenate([v, xv])
            counts = np.concatenate([counts, xn])
        if self.normalize and not normalised and v.size:
            local = np.repeat(np.tile(np.arange(len(texts)), len(counts) // len(texts)), counts)
            norms = np.sqrt(np.bincount(local, weights=v * v, minlength=len(texts)))
            v = v / norms[local]
        return rows, c, v

    def python_grams(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """The reference of the compiled path: tokens in Python, names hashed through the
        caches (``compiled_text=False``)."""
        longest = self.max_token_chars
        for k, t in enumerate(texts):
            if max(map(len, WORD_RE.findall(t.lower())), default=0) > longest:
                return np.zeros(0, np.int64), np.zeros(0), np.zeros(len(texts), np.int64), k
        tok = self.text.tokens
        pairs = [tok(t) for t in texts]
        caches = self.caches
        wc, wv, wn = caches.hash_names([w for w, _ in pairs], caches.words, "w:")
        cc, cv, cn = caches.hash_names([c for _, c in pairs], caches.chars, "c:")
        # per text: its words, then its characters
        order = np.argsort(
            np.concatenate([np.repeat(np.arange(len(texts)) * 2, wn),
                            np.repeat(np.arange(len(texts)) * 2 + 1, cn)]),
            kind="stable",
        )  # fmt: skip
        return np.concatenate([wc, cc])[order], np.concatenate([wv, cv])[order], wn + cn, -1


class Crosses:
    """Quadratic pairs ``(a, b)``: for every named feature ``"a:…"`` and ``"b:…"`` of an
    example, a feature with value ``va·vb`` whose hash mixes the two hashes (VW's ``-q``; for
    ``a == b`` each unordered pair once)."""

    def __init__(self, pairs: tuple[tuple[str, str], ...], caches: NameCaches) -> None:
        self.pairs = pairs
        self.caches = caches
        self.index = {g: k for k, g in enumerate(sorted({g for p in pairs for g in p}))}

    def add(
        self,
        names: list[Any],
        rows: np.ndarray,
        codes: np.ndarray,
        vals: np.ndarray,
        n: int,
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    ) -> None:
        """Append the crosses of the named features ``names`` (rows, codes, values) to
        ``parts``."""
        caches = self.caches
        group_of = caches.groups
        if len(group_of) > caches.size:
            group_of.clear()
        index = self.index
        new = set(names).difference(group_of)
        if new:  # charged first: a charge past the bound clears group_of, then all are new
            caches.charge(sum(sys.getsizeof(name) + ENTRY_BYTES for name in new))
            for name in set(names).difference(group_of):
                group_of[name] = index.get(str(name).partition(":")[0], -1) if ":" in name else -1
        grp = np.fromiter(map(group_of.__getitem__, names), dtype=np.int64, count=len(names))
        pos = np.arange(len(names), dtype=np.int64)
        for a, b in self.pairs:
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
            parts.append((rows[ea], _mix(ha, hb), vals[ea] * vals[eb]))


def _mix(ha: np.ndarray, hb: np.ndarray) -> np.ndarray:
    """A signed 32-bit hash of a pair of signed 32-bit hashes (VW's FNV-style mix)."""
    ua = (ha & 0xFFFFFFFF).astype(np.uint32)
    ub = (hb & 0xFFFFFFFF).astype(np.uint32)
    mixed = (ua * np.uint32(16777619)) ^ ub
    return mixed.view(np.int32).astype(np.int64)


def _tuple_bytes(names: tuple[Any, ...]) -> int:
    return sys.getsizeof(names) + sum(map(sys.getsizeof, names))


class _BadName(Exception):
    def __init__(self, name: Any, msg: str) -> None:
        self.name, self.msg = name, msg
