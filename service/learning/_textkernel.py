"""The compiled text path: word and character n-grams hashed over UTF-8 bytes, in numba.

Bit-identical to :meth:`service.learning.text.TextFeaturizer.tokens` followed by
``mmh3.hash("w:" + gram)`` / ``mmh3.hash("c:" + gram)`` (tested on Unicode, emoji, URLs, mixed
case, empty strings and random text): the same names, the same values, emitted per text in
the same order (distinct word n-grams in order of first occurrence, then distinct character
n-grams likewise), so even sums of colliding buckets are the same to the bit.

How: Python lower-cases the whole batch at once (``str.lower()``, the texts joined by NUL) and
encodes it as UTF-8; the kernel does the rest: decoding code points and classing each with a
table built once from :mod:`re`'s own ``\\w`` (so the words are the reference's words),
building the n-grams as byte spans of the normalised text
``" " + " ".join(words) + " "``, MurmurHash3 (x86, 32 bit, seed 0) of prefix + span, and
first-occurrence deduplication (by bytes, not by hash) with counts.
"""

from __future__ import annotations

import re

import numpy as np
from numba import njit

_M32 = 0xFFFFFFFF


def lowered_utf8(texts: list[str]) -> bytes:
    """The texts lower-cased and joined by NUL, as UTF-8. ``str.lower`` of the joined string
    is the join of each ``lower`` (the only context-dependent lower-casing, the final sigma,
    stops at NUL, which is neither cased nor case-ignorable); a NUL inside a text is a
    non-word character like a space, so it becomes one first. Raises ``UnicodeEncodeError``
    for a lone surrogate."""
    joined = "\x00".join(texts)
    if joined.count("\x00") != len(texts) - 1:
        joined = "\x00".join(t.replace("\x00", " ") for t in texts)
    return joined.lower().encode("utf-8")


_WORD: np.ndarray | None = None


def word_table() -> np.ndarray:
    """``table[cp] == 1`` iff the code point matches ``\\w`` in :mod:`re` (built once, from
    the regular expression itself, so the kernel's words are the reference's words)."""
    global _WORD
    if _WORD is None:
        table = np.zeros(0x110000, dtype=np.uint8)
        every = np.arange(0x110000, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
        for m in re.finditer(r"\w+", every):
            table[m.start() : m.end()] = 1
        _WORD = table
    return _WORD


def text_grams(
    texts: list[str],
    word_ngrams: tuple[int, int] | None,
    char_ngrams: tuple[int, int] | None,
    char_limit: int | None,
    binary: bool,
    normalize: bool = False,
    max_token: int = 1 << 62,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(codes int64, values float64, per-text counts int64, first bad text) of the texts'
    ``w:``/``c:`` names; with ``normalize`` each text's values are scaled to unit L2 norm. The
    last item is the index of the first text with a word of more than ``max_token`` characters
    (then the arrays are empty), or -1."""
    buf = np.frombuffer(lowered_utf8(texts), dtype=np.uint8)
    wlo, whi = word_ngrams if word_ngrams is not None else (0, -1)
    clo, chi = char_ngrams if char_ngrams is not None else (0, -1)
    limit = char_limit if char_limit is not None else -1
    return _grams(
        buf, word_table(), len(texts), wlo, whi, clo, chi, limit, binary, normalize, max_token
    )


@njit(cache=True, nogil=True, inline="always")
def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


@njit(cache=True, nogil=True, inline="always")
def _murmur3(key: np.ndarray, n: int) -> int:
    """MurmurHash3 x86 32-bit, seed 0, of ``key[:n]``, as a signed 32-bit value (mmh3's
    ``hash(key, 0, signed=True)``). int64 arithmetic masked to 32 bits: a product that wraps
    past 2**63 keeps its low 32 bits."""
    c1 = 0xCC9E2D51
    c2 = 0x1B873593
    h = 0
    nb = n >> 2
    for i in range(nb):
        j = i * 4
        k = int(key[j]) | (int(key[j + 1]) << 8) | (int(key[j + 2]) << 16) | (int(key[j + 3]) << 24)
        k = (k * c1) & _M32
        k = _rotl(k, 15)
        k = (k * c2) & _M32
        h ^= k
        h = _rotl(h, 13)
        h = (h * 5 + 0xE6546B64) & _M32
    tail = nb * 4
    rem = n & 3
    if rem:
        k = 0
        if rem == 3:
            k ^= int(key[tail + 2]) << 16
        if rem >= 2:
            k ^= int(key[tail + 1]) << 8
        k ^= int(key[tail])
        k = (k * c1) & _M32
        k = _rotl(k, 15)
        k = (k * c2) & _M32
        h ^= k
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    if h >= 0x80000000:
        h -= 0x100000000
    return h


@njit(cache=True, nogil=True, inline="always")
def _hash_span(s: np.ndarray, a: int, b: int, p0: int, key: np.ndarray) -> int:
    """Hash of ``p0 ":" s[a:b]`` (the prefixed name)."""
    key[0] = p0
    key[1] = 58  # ':'
    m = b - a
    for t in range(m):
        key[2 + t] = s[a + t]
    return _murmur3(key, m + 2)


@njit(cache=True, nogil=True, inline="always")
def _equal(s: np.ndarray, a: int, b: int, c: int, d: int) -> bool:
    if b - a != d - c:
        return False
    for t in range(b - a):  # noqa: SIM110 - numba compiles the loop
        if s[a + t] != s[c + t]:
            return False
    return True


@njit(cache=True, nogil=True)
def _dedupe(
    s: np.ndarray,
    sa: np.ndarray,
    sb: np.ndarray,
    k: int,
    p0: int,
    key: np.ndarray,
    table: np.ndarray,
    stamp: np.ndarray,
    gen: int,
    ia: np.ndarray,
    ib: np.ndarray,
    ih: np.ndarray,
    ic: np.ndarray,
) -> int:
    """The distinct names among the spans ``s[sa[i]:sb[i]]``, ``i < k`` (prefixed with
    ``p0 ":"``), in order of first occurrence, into ``ia/ib/ih/ic``; returns their number."""
    mask = table.shape[0] - 1
    m = 0
    for i in range(k):
        a = sa[i]
        b = sb[i]
        h = _hash_span(s, a, b, p0, key)
        slot = h & mask
        while True:  # linear probing; equal names are equal bytes, not merely equal hashes
            if stamp[slot] != gen:
                stamp[slot] = gen
                table[slot] = m
                ia[m] = a
                ib[m] = b
                ih[m] = h
                ic[m] = 1
                m += 1
                break
            j = table[slot]
            if ih[j] == h and _equal(s, ia[j], ib[j], a, b):
                ic[j] += 1
                break
            slot = (slot + 1) & mask
    return m


@njit(cache=True, nogil=True)
def _grams(
    buf: np.ndarray,
    word: np.ndarray,
    n_texts: int,
    wlo: int,
    whi: int,
    clo: int,
    chi: int,
    limit: int,
    binary: bool,
    normalize: bool,
    max_token: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    size = buf.shape[0]
    # segment bounds (texts are NUL-separated) and the longest one
    seg = np.empty(n_texts + 1, dtype=np.int64)
    seg[0] = 0
    k = 1
    longest = 0
    for p in range(size):
        if buf[p] == 0:
            seg[k] = p + 1
            longest = max(longest, p - seg[k - 1])
            k += 1
    seg[n_texts] = size + 1
    longest = max(longest, size - seg[n_texts - 1])
    nw = max(whi - wlo + 1, 0)
    nc = max(chi - clo + 1, 0)
    per_pass = max(nw, nc) * (longest + 2) + 1
    cap = 16
    while cap < 2 * per_pass:
        cap *= 2
    table = np.zeros(cap, dtype=np.int64)
    stamp = np.zeros(cap, dtype=np.int64)
    gen = 0
    ia = np.empty(per_pass, dtype=np.int64)
    ib = np.empty(per_pass, dtype=np.int64)
    ih = np.empty(per_pass, dtype=np.int64)
    ic = np.empty(per_pass, dtype=np.int64)
    sa = np.empty(per_pass, dtype=np.int64)
    sb = np.empty(per_pass, dtype=np.int64)
    s = np.empty(longest + 2, dtype=np.uint8)
    key = np.empty(longest + 4, dtype=np.uint8)
    wstart = np.empty(longest + 2, dtype=np.int64)
    wend = np.empty(longest + 2, dtype=np.int64)
    cps = np.empty(longest + 3, dtype=np.int64)
    out_cap = max(16, (nw + nc) * (size + 2 * n_texts) // 4 + 16)
    codes = np.empty(out_cap, dtype=np.int64)
    vals = np.empty(out_cap, dtype=np.float64)
    counts = np.zeros(n_texts, dtype=np.int64)
    total = 0
    for t in range(n_texts):
        # s = " " + " ".join(words) + " ", words = maximal runs of \w code points
        slen = 1
        s[0] = 32
        nwords = 0
        inword = False
        wlen = 0
        p = seg[t]
        end = seg[t + 1] - 1
        while p < end:
            c0 = np.int64(buf[p])
            if c0 < 0x80:
                n_bytes = 1
                cp = c0
            elif c0 < 0xE0:
                n_bytes = 2
                cp = ((c0 & 0x1F) << 6) | (np.int64(buf[p + 1]) & 0x3F)
            elif c0 < 0xF0:
                n_bytes = 3
                cp = ((c0 & 0x0F) << 12) | ((np.int64(buf[p + 1]) & 0x3F) << 6)
                cp |= np.int64(buf[p + 2]) & 0x3F
            else:
                n_bytes = 4
                cp = ((c0 & 0x07) << 18) | ((np.int64(buf[p + 1]) & 0x3F) << 12)
                cp |= ((np.int64(buf[p + 2]) & 0x3F) << 6) | (np.int64(buf[p + 3]) & 0x3F)
            if word[cp]:
                if not inword:
                    wstart[nwords] = slen
                    inword = True
                    wlen = 0
                wlen += 1
                if wlen > max_token:
                    return codes[:0], vals[:0], counts, t
                for q in range(n_bytes):
                    s[slen + q] = buf[p + q]
                slen += n_bytes
            elif inword:
                wend[nwords] = slen
                nwords += 1
                s[slen] = 32
                slen += 1
                inword = False
            p += n_bytes
        if inword:
            wend[nwords] = slen
            nwords += 1
            s[slen] = 32
            slen += 1
        if nwords == 0:  # no word: no n-gram of either kind
            continue
        before = total
        for kind in range(2):
            k = 0
            if kind == 0:
                p0 = 119  # 'w'
                for n in range(wlo, whi + 1):
                    for i in range(nwords - n + 1):
                        sa[k] = wstart[i]
                        sb[k] = wend[i + n - 1]
                        k += 1
            else:
                p0 = 99  # 'c'
                ncp = 0
                for p in range(slen):
                    if (s[p] & 0xC0) != 0x80:
                        cps[ncp] = p
                        ncp += 1
                cps[ncp] = slen
                if 0 <= limit < ncp:
                    ncp = limit
                for n in range(clo, chi + 1):
                    for i in range(ncp - n + 1):
                        sa[k] = cps[i]
                        sb[k] = cps[i + n]
                        k += 1
            if k == 0:
                continue
            gen += 1
            m = _dedupe(s, sa, sb, k, p0, key, table, stamp, gen, ia, ib, ih, ic)
            if total + m > out_cap:
                while total + m > out_cap:
                    out_cap *= 2
                c2 = np.empty(out_cap, dtype=np.int64)
                v2 = np.empty(out_cap, dtype=np.float64)
                c2[:total] = codes[:total]
                v2[:total] = vals[:total]
                codes = c2
                vals = v2
            for j in range(m):
                codes[total + j] = ih[j]
                vals[total + j] = 1.0 if binary else float(ic[j])
            total += m
        counts[t] = total - before
        if normalize and total > before:  # as numpy's bincount and divide do it: in order
            sq = 0.0
            for j in range(before, total):
                sq += vals[j] * vals[j]
            norm = np.sqrt(sq)
            for j in range(before, total):
                vals[j] = vals[j] / norm
    return codes[:total], vals[:total], counts, -1
