"""A compiled reader of the common ingest body: ``{"examples": [...]}`` (or a bare list) of
examples with named features, text, a label and an id, straight from the UTF-8 bytes.

It builds no Python object per example: feature names are hashed over their bytes
(MurmurHash3, as ``mmh3.hash(name, 0, signed=True)``), values parsed where the result is
exact, and text, labels and ids are returned as byte spans. It is a *shortcut*, never a
judge: on anything it is not sure of — an escape in a key or a name, a number it cannot
convert exactly, a repeated key or name, ``meta``, ``null``, a dense list, malformed JSON — it
gives up (a non-zero status) and the caller takes the general path (orjson, then the
featurizer), which accepts or refuses the body and says why. So what it accepts is featurized
to the bit as the general path would.

Number conversion is exact: a decimal ``m · 10^e`` with ``m < 2**53`` and ``|e| <= 22`` is one
correctly rounded IEEE multiplication or division of two exact doubles (Clinger's fast path);
a longer mantissa (up to 18 digits) over ``10^k``, ``k <= 25``, is divided exactly in integers
(:func:`_exact_div`); other numbers are marked *slow* and converted by Python's ``float``
(correctly rounded, like orjson), and integers of more than 18 digits give up.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from service.learning._textkernel import _murmur3

# per-example columns of ``ex``
F_END, TEXT_A, TEXT_B, TEXT_ESC, LABEL_A, LABEL_B, ID_A, ID_B = range(8)
EX_COLS = 8

OK = 0
GIVE_UP = 1

_POW10 = np.array([10.0**k for k in range(23)], dtype=np.float64)
_POW5 = np.array([5**k for k in range(26)], dtype=np.int64)  # 5**25 < 2**59


@njit(cache=True, nogil=True, inline="always")
def _bits(x: int) -> int:
    """The bit length of ``x >= 0``."""
    b = 0
    while x > 0:
        x >>= 1
        b += 1
    return b


@njit(cache=True, nogil=True)
def _exact_div(m: int, k: int, pow5: np.ndarray) -> float:
    """``m / 10**k`` correctly rounded (to nearest, ties to even), for ``0 < m < 2**60`` and
    ``1 <= k <= 25``: long division of ``m`` by ``5**k`` to 55 bits or more (``5**25 < 2**59``,
    so each step adds at least 3 bits), rounded with a guard bit and a sticky bit, then
    scaled by ``2**-k`` (exact)."""
    p = pow5[k]
    q = m // p
    r = m % p
    pbits = _bits(p)
    shift = 0
    while q < (1 << 54):  # several quotient bits a step: r << c stays below 2**62
        c = min(62 - pbits, 55 - _bits(q))
        r <<= c
        q = (q << c) | (r // p)
        r %= p
        shift += c
    bits = _bits(q)
    extra = bits - 53
    mant = q >> extra
    guard = (q >> (extra - 1)) & 1
    sticky = (q & ((1 << (extra - 1)) - 1)) != 0 or r != 0
    if guard == 1 and (sticky or (mant & 1) == 1):
        mant += 1
        if mant == (1 << 53):
            mant >>= 1
            extra += 1
    return math.ldexp(float(mant), extra - shift - k)


@njit(cache=True, nogil=True, inline="always")
def _ws(s: np.ndarray, i: int, n: int) -> int:
    while i < n and (s[i] == 32 or s[i] == 10 or s[i] == 13 or s[i] == 9):
        i += 1
    return i


@njit(cache=True, nogil=True)
def _same_bytes(s: np.ndarray, a: int, b: int, c: int, d: int) -> bool:
    if b - a != d - c:
        return False
    for t in range(b - a):  # noqa: SIM110 - numba compiles the loop
        if s[a + t] != s[c + t]:
            return False
    return True


@njit(cache=True, nogil=True)
def _string(s: np.ndarray, i: int, n: int) -> tuple[int, int, bool]:
    """``s[i]`` is a quote: (end of the contents, index after the closing quote, escaped);
    end -1 for an unterminated string or a raw control character (invalid JSON)."""
    j = i + 1
    esc = False
    while j < n:
        c = s[j]
        if c == 34:  # "
            return j, j + 1, esc
        if c == 92:  # backslash: the next byte is escaped
            esc = True
            j += 2
            continue
        if c < 32:
            return -1, -1, esc
        j += 1
    return -1, -1, esc


@njit(cache=True, nogil=True)
def _number(
    s: np.ndarray, i: int, n: int, pow10: np.ndarray, pow5: np.ndarray
) -> tuple[int, float, int]:
    """A JSON number at ``s[i]``: (index after it, value, kind) with kind 0 exact, 1 slow
    (convert the span in Python), -1 give up (not a JSON number, or an integer of more than
    18 digits)."""
    j = i
    neg = False
    if j < n and s[j] == 45:  # -
        neg = True
        j += 1
    if j >= n or s[j] < 48 or s[j] > 57:
        return j, 0.0, -1
    m = 0
    digits = 0  # significant digits in m
    if s[j] == 48:
        j += 1
        if j < n and 48 <= s[j] <= 57:
            return j, 0.0, -1  # a leading zero
    else:
        while j < n and 48 <= s[j] <= 57:
            if digits < 18:
                m = m * 10 + (s[j] - 48)
                digits += 1
            else:
                digits += 1
            j += 1
    frac = 0
    is_int = True
    if j < n and s[j] == 46:  # .
        is_int = False
        j += 1
        if j >= n or s[j] < 48 or s[j] > 57:
            return j, 0.0, -1
        while j < n and 48 <= s[j] <= 57:
            d = s[j] - 48
            if m == 0 and d == 0:
                frac += 1  # a leading zero of the fraction: not significant
            elif digits < 18:
                m = m * 10 + d
                digits += 1
                frac += 1
            else:
                digits += 1
            j += 1
    exp = 0
    if j < n and (s[j] == 101 or s[j] == 69):  # e E
        is_int = False
        j += 1
        eneg = False
        if j < n and (s[j] == 43 or s[j] == 45):
            eneg = s[j] == 45
            j += 1
        if j >= n or s[j] < 48 or s[j] > 57:
            return j, 0.0, -1
        while j < n and 48 <= s[j] <= 57:
            if exp < 100000:
                exp = exp * 10 + (s[j] - 48)
            j += 1
        if eneg:
            exp = -exp
    if digits > 18:
        if is_int:
            return j, 0.0, -1  # a huge integer: the general path decides
        return j, 0.0, 1
    if is_int:
        v = float(m)  # exact below 2**53, correctly rounded (to even) above, as float(int)
    else:
        e10 = exp - frac
        if m < (1 << 53) and -22 <= e10 <= 22:  # Clinger: one exact operation
            v = float(m) * pow10[e10] if e10 >= 0 else float(m) / pow10[-e10]
        elif m == 0:
            v = 0.0
        elif -25 <= e10 < 0:
            v = _exact_div(m, -e10, pow5)
        else:
            return j, 0.0, 1
    return j, -v if neg else v, 0


_FEATURES = np.array([ord(c) for c in "features"], dtype=np.uint8)
_LABEL = np.array([ord(c) for c in "label"], dtype=np.uint8)
_EXAMPLES = np.array([ord(c) for c in "examples"], dtype=np.uint8)


@njit(cache=True, nogil=True)
def _is(s: np.ndarray, a: int, b: int, word: np.ndarray) -> bool:
    if b - a != word.shape[0]:
        return False
    for t in range(b - a):  # noqa: SIM110 - numba compiles the loop
        if s[a + t] != word[t]:
            return False
    return True


@njit(cache=True, nogil=True)
def _key(s: np.ndarray, a: int, b: int, features: np.ndarray, label: np.ndarray) -> int:
    """Which example key ``s[a:b]`` is: 1 features, 2 text, 3 label, 4 id, 0 another."""
    m = b - a
    if _is(s, a, b, features):
        return 1
    if m == 4 and s[a] == 116 and s[a + 1] == 101 and s[a + 2] == 120 and s[a + 3] == 116:
        return 2
    if _is(s, a, b, label):
        return 3
    if m == 2 and s[a] == 105 and s[a + 1] == 100:
        return 4
    return 0


@njit(cache=True, nogil=True)
def _repeats(s: np.ndarray, codes: np.ndarray, names: np.ndarray, lo: int, hi: int) -> bool:
    """Whether a name repeats among features ``lo:hi`` (same hash, same bytes)."""
    m = hi - lo
    if m <= 32:
        for p in range(lo, hi):
            for q in range(lo, p):
                if codes[p] == codes[q] and _same_bytes(
                    s, names[p, 0], names[p, 1], names[q, 0], names[q, 1]
                ):
                    return True
        return False
    order = np.argsort(codes[lo:hi])
    for t in range(1, m):
        p, q = lo + order[t], lo + order[t - 1]
        if codes[p] == codes[q]:
            r = t - 1  # every earlier name of the same hash
            while r >= 0 and codes[lo + order[r]] == codes[p]:
                q = lo + order[r]
                if _same_bytes(s, names[p, 0], names[p, 1], names[q, 0], names[q, 1]):
                    return True
                r -= 1
    return False


@njit(cache=True, nogil=True)
def scan(
    s: np.ndarray, max_name: int, pow10: np.ndarray, cap_ex: int, cap_f: int
) -> tuple[
    int, int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool
]:
    """(status, examples, features, ex[n, EX_COLS], codes, values, kinds, names[nnz, 2],
    value spans[nnz, 2], one schema): per example the end of its features in the feature
    arrays and the spans of its text, label and id (-1 when absent); per feature its hash,
    value, kind (0 exact, 1 slow: convert its span in Python) and the spans of its name and
    value; and whether every example has the same names in the same order. ``status`` is
    :data:`OK` or :data:`GIVE_UP`."""
    n = s.shape[0]
    ex = np.full((cap_ex, EX_COLS), -1, dtype=np.int64)
    codes = np.empty(cap_f, dtype=np.int64)
    vals = np.empty(cap_f, dtype=np.float64)
    kinds = np.zeros(cap_f, dtype=np.int8)
    names = np.empty((cap_f, 2), dtype=np.int64)
    spans = np.empty((cap_f, 2), dtype=np.int64)
    key = np.empty(max_name + 4, dtype=np.uint8)
    fail = (GIVE_UP, 0, 0, ex, codes, vals, kinds, names, spans, False)
    i = _ws(s, 0, n)
    wrapped = False
    if i < n and s[i] == 123:  # {"examples": [...]}
        i = _ws(s, i + 1, n)
        if i >= n or s[i] != 34:
            return fail
        a = i + 1
        b, i, esc = _string(s, i, n)
        if esc or not _is(s, a, b, _EXAMPLES):
            return fail
        i = _ws(s, i, n)
        if i >= n or s[i] != 58:
            return fail
        i = _ws(s, i + 1, n)
        wrapped = True
    if i >= n or s[i] != 91:  # [
        return fail
    i = _ws(s, i + 1, n)
    ne = 0
    nf = 0
    one = True
    first_lo = 0
    first_hi = 0
    if i < n and s[i] == 93:
        return fail  # no examples: the general path says so
    while True:
        if i >= n or s[i] != 123 or ne >= cap_ex:
            return fail
        i = _ws(s, i + 1, n)
        got = 0  # keys seen, as bits
        f_lo = nf
        has_features = False
        if i < n and s[i] == 125:
            return fail  # {}: neither features nor text
        while True:
            if i >= n or s[i] != 34:
                return fail
            ka = i + 1
            kb, i, esc = _string(s, i, n)
            if kb < 0 or esc:
                return fail
            k = _key(s, ka, kb, _FEATURES, _LABEL)
            if k == 0 or (got >> k) & 1:
                return fail  # another key (meta, a typo) or a repeated one
            got |= 1 << k
            i = _ws(s, i, n)
            if i >= n or s[i] != 58:
                return fail
            i = _ws(s, i + 1, n)
            if i >= n:
                return fail
            if k == 1:  # features: {"name": number, ...}
                if s[i] != 123:
                    return fail
                has_features = True
                i = _ws(s, i + 1, n)
                if i < n and s[i] == 125:
                    i += 1
                else:
                    while True:
                        if i >= n or s[i] != 34:
                            return fail
                        na = i + 1
                        nb, i, esc = _string(s, i, n)
                        if nb < 0 or esc or nb - na > max_name:
                            return fail
                        for t in range(nb - na):
                            key[t] = s[na + t]
                        h = _murmur3(key, nb - na)
                        i = _ws(s, i, n)
                        if i >= n or s[i] != 58:
                            return fail
                        i = _ws(s, i + 1, n)
                        spans[nf, 0] = i
                        i, v, kind = _number(s, i, n, pow10, _POW5)
                        if kind < 0 or nf >= cap_f:
                            return fail
                        spans[nf, 1] = i
                        codes[nf] = h
                        vals[nf] = v
                        kinds[nf] = kind
                        names[nf, 0] = na
                        names[nf, 1] = nb
                        nf += 1
                        i = _ws(s, i, n)
                        if i < n and s[i] == 44:
                            i = _ws(s, i + 1, n)
                            continue
                        if i < n and s[i] == 125:
                            i += 1
                            break
                        return fail
                    if _repeats(s, codes, names, f_lo, nf):
                        return fail  # a repeated name: JSON keeps the last value
            elif k == 2:  # text: a string
                if s[i] != 34:
                    return fail
                ta = i + 1
                tb, i, esc = _string(s, i, n)
                if tb < 0:
                    return fail
                ex[ne, TEXT_A] = ta
                ex[ne, TEXT_B] = tb
                ex[ne, TEXT_ESC] = 1 if esc else 0
            elif k == 3:  # label: a number or a string without escapes
                la = i
                if s[i] == 34:
                    lb, i, esc = _string(s, i, n)
                    if lb < 0 or esc:
                        return fail
                    lb = i
                else:
                    i, v, kind = _number(s, i, n, pow10, _POW5)
                    if kind != 0:
                        return fail
                    lb = i
                ex[ne, LABEL_A] = la
                ex[ne, LABEL_B] = lb
            else:  # id: a string without escapes
                if s[i] != 34:
                    return fail
                ia = i + 1
                ib, i, esc = _string(s, i, n)
                if ib < 0 or esc:
                    return fail
                ex[ne, ID_A] = ia
                ex[ne, ID_B] = ib
            i = _ws(s, i, n)
            if i < n and s[i] == 44:
                i = _ws(s, i + 1, n)
                continue
            if i < n and s[i] == 125:
                i += 1
                break
            return fail
        if not has_features and ex[ne, TEXT_A] < 0:
            return fail
        ex[ne, F_END] = nf
        if ne == 0:
            first_lo, first_hi = f_lo, nf
        elif one:
            if nf - f_lo != first_hi - first_lo or not has_features:
                one = False
            else:
                for q in range(nf - f_lo):
                    if codes[f_lo + q] != codes[first_lo + q] or not _same_bytes(
                        s, names[f_lo + q, 0], names[f_lo + q, 1],
                        names[first_lo + q, 0], names[first_lo + q, 1],
                    ):  # fmt: skip
                        one = False
                        break
        if ne == 0 and not has_features:
            one = False
        ne += 1
        i = _ws(s, i, n)
        if i < n and s[i] == 44:
            i = _ws(s, i + 1, n)
            continue
        if i < n and s[i] == 93:
            i += 1
            break
        return fail
    if wrapped:
        i = _ws(s, i, n)
        if i >= n or s[i] != 125:
            return fail
        i += 1
    if _ws(s, i, n) != n:
        return fail
    return OK, ne, nf, ex, codes, vals, kinds, names, spans, one
