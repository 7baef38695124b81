"""Text → tokens: lowercase word tokens, word n-grams and character n-grams.

This module turns one string into the *names* of its text features and their values; the
:class:`~service.learning.features.Featurizer` hashes them (with a ``"w:"``/``"c:"`` prefix, so
text never shares a name with a named feature on purpose) and places them in the batch.

Conventions (documented here once, used by every model):

- Word tokens are ``\\w+`` runs of the lower-cased text (Unicode letters, digits, ``_``).
- Word n-grams join ``n`` consecutive tokens with one space: ``"free money"``.
- Character n-grams run over the *normalised* text ``" " + " ".join(tokens) + " "``, so
  punctuation and runs of whitespace are gone and the spaces mark word boundaries: the 4-grams
  of ``"Buy now!"`` are ``" buy"``, ``"buy "``, ``"uy n"``, ``"y no"``, ``" now"``, ``"now "``.
  A text shorter than ``n`` (after normalising) yields no ``n``-gram.
- ``binary`` gives every distinct token the value 1; otherwise its count.

>>> t = TextFeaturizer(word_ngrams=(1, 2), char_ngrams=None, binary=False)
>>> words, chars = t.tokens("Free money, FREE!")
>>> sorted(words.items())
[('free', 2), ('free money', 1), ('money', 1), ('money free', 1)]
>>> chars
{}
>>> TextFeaturizer(word_ngrams=None, char_ngrams=(4, 4)).tokens("Buy now!")[1]
{' buy': 1, 'buy ': 1, 'uy n': 1, 'y no': 1, ' now': 1, 'now ': 1}
"""

from __future__ import annotations

import re
from collections import Counter

WORD_RE = re.compile(r"\w+")

MAX_NGRAM = 16
"""Largest n accepted for word or character n-grams (beyond that, features never repeat)."""


class TextFeaturizer:
    """Tokenizer for one text spec; pure Python, no hashing (the caller hashes with a cache)."""

    __slots__ = ("binary", "char_ngrams", "word_ngrams")

    def __init__(
        self,
        *,
        word_ngrams: tuple[int, int] | None = (1, 1),
        char_ngrams: tuple[int, int] | None = None,
        binary: bool = True,
    ) -> None:
        for field, rng in (("word_ngrams", word_ngrams), ("char_ngrams", char_ngrams)):
            if rng is not None:
                check_ngram_range(field, rng)
        if word_ngrams is None and char_ngrams is None:
            raise ValueError("text: at least one of word_ngrams and char_ngrams must be set")
        self.word_ngrams = word_ngrams
        self.char_ngrams = char_ngrams
        self.binary = binary

    def tokens(self, text: str) -> tuple[dict[str, int], dict[str, int]]:
        """(word n-grams → value, character n-grams → value) of one text."""
        words = WORD_RE.findall(text.lower())
        wgrams: list[str] = []
        if self.word_ngrams is not None:
            lo, hi = self.word_ngrams
            for n in range(lo, hi + 1):
                if n == 1:
                    wgrams.extend(words)
                else:
                    wgrams.extend(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))
        cgrams: list[str] = []
        if self.char_ngrams is not None:
            s = " " + " ".join(words) + " " if words else ""
            lo, hi = self.char_ngrams
            for n in range(lo, hi + 1):
                cgrams.extend([s[i : i + n] for i in range(len(s) - n + 1)])
        if self.binary:
            return dict.fromkeys(wgrams, 1), dict.fromkeys(cgrams, 1)
        return dict(Counter(wgrams)), dict(Counter(cgrams))


def check_ngram_range(field: str, rng: object) -> tuple[int, int]:
    """Validate an n-gram range ``(lo, hi)`` with ``1 ≤ lo ≤ hi ≤ MAX_NGRAM``."""
    if not isinstance(rng, tuple | list) or len(rng) != 2 or not all(type(v) is int for v in rng):
        raise ValueError(f"{field} must be a pair [lo, hi] of integers, got {rng!r}")
    lo, hi = rng
    if not 1 <= lo <= hi <= MAX_NGRAM:
        raise ValueError(f"{field} must satisfy 1 <= lo <= hi <= {MAX_NGRAM}, got {list(rng)}")
    return int(lo), int(hi)
