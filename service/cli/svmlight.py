"""A fast svmlight / libsvm reader: ``LABEL idx:val idx:val ... [# comment]`` per line.

The whole buffer is scanned by one compiled loop (token boundaries, integer indices and
decimal values), so Python touches each *distinct label* once, not each token. Values are
parsed exactly: a decimal with at most 15 significant digits and a power of ten within
10^±22 is ``mantissa × 10^e`` or ``mantissa / 10^−e`` — one correctly rounded operation on
two exact doubles, hence the same double as ``float(text)``; anything longer falls back to
``float()`` for that token. ``qid:`` tokens are skipped; blank and comment-only lines too.

Indices are used as given (no hashing); rows come out sorted with duplicates summed and
zeros dropped (the :class:`~service.learning.batch.Batch` contract).

>>> parsed = parse_svmlight(b"+1 3:0.5 1:2\\n# a comment\\n-1 2:1e-3 # tail\\n")
>>> parsed.label_values.tolist(), parsed.indptr.tolist(), parsed.max_index
([1.0, -1.0], [0, 2, 3], 3)
>>> parse_svmlight(b"ham 1:1\\nspam 2:1").labels
[b'ham', b'spam']
>>> parsed.indices.tolist(), parsed.data.tolist()
([1, 3, 2], [2.0, 0.5, 0.001])
"""

from __future__ import annotations

import contextlib
import mmap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit

from service.cli.datasets import COMPRESSED, open_binary
from service.errors import MalformedBody
from service.learning.batch import assemble
from service.learning.values import MAX_ABS_VALUE

_POW10 = np.array([10.0**k for k in range(23)])
_ERRORS = {
    1: "a feature must be idx:val",
    2: "a feature index must be a non-negative integer",
    3: "a feature value must be a finite decimal number",
    4: "a feature index is too large",
}


@njit(cache=True, nogil=True, inline="always")
def _is_space(c: int) -> bool:
    return c == 32 or c == 9 or c == 13  # ' ', '\t', '\r'


@njit(cache=True, nogil=True, inline="always")
def _parse_decimal(buf: np.ndarray, s: int, pow10: np.ndarray) -> tuple[int, float, int]:
    """Parse the longest decimal number at ``buf[s:]``: (status, value, end). Status 1: parsed
    exactly; 2: a valid number ``float()`` must finish; 0: no number here."""
    n_buf = buf.shape[0]
    k = s
    neg = False
    if k < n_buf and (buf[k] == 43 or buf[k] == 45):  # + -
        neg = buf[k] == 45
        k += 1
    mant = 0
    sig = 0
    digits = 0
    exp10 = 0
    while k < n_buf:
        d = int(buf[k]) - 48
        if d < 0 or d > 9:
            break
        digits += 1
        if sig > 0 or d != 0:
            if sig < 18:
                mant = mant * 10 + d
            else:
                exp10 += 1
            sig += 1
        k += 1
    if k < n_buf and buf[k] == 46:  # .
        k += 1
        while k < n_buf:
            d = int(buf[k]) - 48
            if d < 0 or d > 9:
                break
            digits += 1
            if sig > 0 or d != 0:
                if sig < 18:
                    mant = mant * 10 + d
                    exp10 -= 1
                sig += 1
            else:
                exp10 -= 1
            k += 1
    if digits == 0:
        return 0, 0.0, k
    if k < n_buf and (buf[k] == 101 or buf[k] == 69):  # e E
        k += 1
        eneg = False
        if k < n_buf and (buf[k] == 43 or buf[k] == 45):
            eneg = buf[k] == 45
            k += 1
        ed = 0
        ev = 0
        while k < n_buf:
            d = int(buf[k]) - 48
            if d < 0 or d > 9:
                break
            if ev < 100000:
                ev = ev * 10 + d
            ed += 1
            k += 1
        if ed == 0:
            return 0, 0.0, k
        exp10 += -ev if eneg else ev
    if mant == 0:
        return 1, -0.0 if neg else 0.0, k
    if sig > 15 or exp10 > 22 or exp10 < -22:
        return 2, 0.0, k
    v = mant * pow10[exp10] if exp10 >= 0 else mant / pow10[-exp10]
    return 1, -v if neg else v, k


@njit(cache=True, nogil=True, inline="always")
def _token_end(buf: np.ndarray, k: int) -> bool:
    """Whether a token ends at ``k`` (end of buffer, space, tab, CR, newline or '#')."""
    if k >= buf.shape[0]:
        return True
    c = buf[k]
    return c == 32 or c == 9 or c == 13 or c == 10 or c == 35


@njit(cache=True, nogil=True)
def _scan_plain(
    buf: np.ndarray,
    lab: np.ndarray,
    lab_v: np.ndarray,
    lab_ok: np.ndarray,
    indptr: np.ndarray,
    idx: np.ndarray,
    val: np.ndarray,
    pow10: np.ndarray,
) -> tuple[int, int, int]:
    """The rows of the usual file, fast: ``[+-]DIGITS( IDX:VAL)*\\n`` with single spaces and
    values ``[+-]DIGITS[.DIGITS]`` of at most 15 digits. Returns (position, rows, nnz) at the
    start of the first line that is anything else (blank, comment, qid, CR, tab, exponent,
    long number, a name, an error), where :func:`_scan` takes over; every row before it is
    exactly what :func:`_scan` would have made of it (same digits, same double)."""
    n_buf = buf.shape[0]
    n = 0
    m = 0
    k = 0
    while k < n_buf:
        start, m0 = k, m
        neg = False
        c = buf[k]
        if c == 43 or c == 45:  # + -
            neg = c == 45
            k += 1
        lv = 0
        nd = 0
        while k < n_buf:
            d = int(buf[k]) - 48
            if d < 0 or d > 9:
                break
            lv = lv * 10 + d
            nd += 1
            k += 1
        if nd == 0 or nd > 15:
            return start, n, m0
        lab[n, 0] = start
        lab[n, 1] = k
        lab[n, 2] = n  # no blank or comment line so far: row n is line n
        lab_v[n] = -float(lv) if neg else float(lv)
        lab_ok[n] = True
        while k < n_buf and buf[k] == 32:
            k += 1
            j = 0
            nd = 0
            while k < n_buf:
                d = int(buf[k]) - 48
                if d < 0 or d > 9:
                    break
                j = j * 10 + d
                nd += 1
                k += 1
            if nd == 0 or nd > 9 or k >= n_buf or buf[k] != 58:  # ':'
                return start, n, m0
            k += 1
            neg = False
            c = buf[k] if k < n_buf else 0
            if c == 43 or c == 45:
                neg = c == 45
                k += 1
            mant = 0
            nd = 0
            while k < n_buf:
                d = int(buf[k]) - 48
                if d < 0 or d > 9:
                    break
                mant = mant * 10 + d
                nd += 1
                k += 1
            fd = 0
            if k < n_buf and buf[k] == 46:  # .
                k += 1
                while k < n_buf:
                    d = int(buf[k]) - 48
                    if d < 0 or d > 9:
                        break
                    mant = mant * 10 + d
                    fd += 1
                    k += 1
            if nd + fd == 0 or nd + fd > 15:
                return start, n, m0
            # mant < 10**15 and fd <= 15: one correctly rounded division, as in _parse_decimal
            v = mant / pow10[fd]
            idx[m] = j
            val[m] = -v if neg else v
            m += 1
        if k < n_buf:
            if buf[k] != 10:
                return start, n, m0
            k += 1
        n += 1
        indptr[n] = m
    return k, n, m


@njit(cache=True, nogil=True)
def _scan(
    buf: np.ndarray,
    k: int,
    n: int,
    m: int,
    lab: np.ndarray,
    lab_v: np.ndarray,
    lab_ok: np.ndarray,
    indptr: np.ndarray,
    idx: np.ndarray,
    val: np.ndarray,
    pow10: np.ndarray,
) -> tuple[int, int, int, np.ndarray, int, int]:
    """One pass over the buffer from position ``k`` (a line start; rows ``n``, features ``m``
    and lines so far ``n`` — what :func:`_scan_plain` left). Per row: label span, numeric
    label (if it is one), line; CSR of the features; the tokens ``float()`` must finish; an
    error code and its line."""
    n_buf = buf.shape[0]
    slow = np.empty((16, 3), dtype=np.int64)  # value position, token start, token end (grows)
    ns = 0
    line = n
    while k < n_buf:
        # -- start of a line: skip blanks; a blank or comment-only line is no row
        while k < n_buf and _is_space(buf[k]):
            k += 1
        if k < n_buf and buf[k] == 35:
            while k < n_buf and buf[k] != 10:
                k += 1
        if k >= n_buf:
            break
        if buf[k] == 10:
            k += 1
            line += 1
            continue
        # -- the label
        ls = k
        while not _token_end(buf, k):
            k += 1
        lab[n, 0] = ls
        lab[n, 1] = k
        lab[n, 2] = line
        status, v, e = _parse_decimal(buf, ls, pow10)
        lab_v[n] = v
        lab_ok[n] = status == 1 and e == k
        # -- the features, up to the end of the line
        while True:
            while k < n_buf and _is_space(buf[k]):
                k += 1
            if k >= n_buf or buf[k] == 10 or buf[k] == 35:
                break
            ts = k
            j = 0
            while k < n_buf:
                d = int(buf[k]) - 48
                if d < 0 or d > 9:
                    break
                j = j * 10 + d
                if j > 2147483646:
                    return n, m, ns, slow, 4, line
                k += 1
            if k < n_buf and buf[k] == 58 and k > ts:
                status, v, e = _parse_decimal(buf, k + 1, pow10)
                if status == 0 or not _token_end(buf, e):
                    return n, m, ns, slow, 3, line
                if status == 2:
                    if ns == slow.shape[0]:
                        bigger = np.empty((2 * ns, 3), dtype=np.int64)
                        bigger[:ns] = slow
                        slow = bigger
                    slow[ns, 0] = m
                    slow[ns, 1] = k + 1
                    slow[ns, 2] = e
                    ns += 1
                idx[m] = j
                val[m] = v
                m += 1
                k = e
                continue
            # not digits then ':': qid:N is skipped, anything else is an error
            if (
                k - ts == 0
                and k + 3 < n_buf
                and buf[k] == 113
                and buf[k + 1] == 105
                and buf[k + 2] == 100
                and buf[k + 3] == 58
            ):
                k += 4
                while not _token_end(buf, k):
                    k += 1
                continue
            code = 2
            if _token_end(buf, k) and k > ts:
                code = 1  # digits without ':'
            elif k == ts:
                while not _token_end(buf, k):
                    if buf[k] == 58:
                        break
                    k += 1
                code = 2 if k < n_buf and buf[k] == 58 else 1
            return n, m, ns, slow, code, line
        # -- skip a trailing comment
        while k < n_buf and buf[k] != 10:
            k += 1
        n += 1
        indptr[n] = m
    return n, m, ns, slow, 0, line


@njit(cache=True, nogil=True)
def _count(buf: np.ndarray) -> tuple[int, int]:
    """(newlines, colons): upper bounds of the rows and the features."""
    lines = 0
    colons = 0
    for k in range(buf.shape[0]):
        c = buf[k]
        if c == 10:
            lines += 1
        elif c == 58:
            colons += 1
    return lines, colons


@njit(cache=True, nogil=True)
def _inspect(
    indptr: np.ndarray, idx: np.ndarray, val: np.ndarray, max_abs: float
) -> tuple[int, bool, int]:
    """(first position of a value that is not finite or over ``max_abs``, or -1; whether every
    row has strictly increasing indices; how many values are zero) — one pass, no temporaries."""
    ordered = True
    zeros = 0
    for i in range(indptr.shape[0] - 1):
        lo = indptr[i]
        for k in range(lo, indptr[i + 1]):
            v = val[k]
            if not abs(v) <= max_abs:
                return k, ordered, zeros
            if v == 0.0:
                zeros += 1
            if k > lo and idx[k] <= idx[k - 1]:
                ordered = False
    return -1, ordered, zeros


@njit(cache=True, nogil=True)
def _drop_zeros(indptr: np.ndarray, idx: np.ndarray, val: np.ndarray) -> int:
    """Remove zero values in place (entries only move left); returns the new nnz."""
    w = 0
    lo = indptr[0]
    for i in range(indptr.shape[0] - 1):
        hi = indptr[i + 1]
        for k in range(lo, hi):
            if val[k] != 0.0:
                idx[w] = idx[k]
                val[w] = val[k]
                w += 1
        lo = hi
        indptr[i + 1] = w
    return w


@dataclass
class Parsed:
    """The rows of an svmlight buffer: CSR arrays, the raw label tokens and their lines."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    label_values: np.ndarray | None  # float64 (n,) when every label is a number
    labels: list[bytes] | None  # the raw label tokens otherwise
    lines: np.ndarray  # 0-based line number of each row
    max_index: int

    @property
    def n(self) -> int:
        return int(self.indptr.shape[0] - 1)


def read_svmlight_file(path: Path, *, normalize: bool = False, transform: str = "none") -> Parsed:
    """:func:`parse_svmlight` of a file. An uncompressed one is memory-mapped, not read: the
    scan reads the page cache in place (no copy of the file into a new buffer)."""
    if path.suffix.lower() not in COMPRESSED and path.stat().st_size > 0:
        with path.open("rb") as fh:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            return parse_svmlight(mapped, normalize=normalize, transform=transform)
        finally:
            with contextlib.suppress(BufferError):  # a traceback still views it: GC unmaps it
                mapped.close()
    with open_binary(path) as fh:
        return parse_svmlight(fh.read(), normalize=normalize, transform=transform)


def parse_svmlight(
    text: bytes | mmap.mmap, *, normalize: bool = False, transform: str = "none"
) -> Parsed:
    """Parse a whole svmlight buffer; ``MalformedBody`` names the (1-based) line at fault.

    ``transform="log1p"`` and ``normalize`` act as in the featurizer (values, then rows)."""
    buf = np.frombuffer(text, dtype=np.uint8)
    lines, colons = _count(buf)
    max_lines, max_nnz = lines + 1, colons
    lab = np.empty((max_lines, 3), dtype=np.int64)  # label start, label end, line
    lab_v = np.empty(max_lines, dtype=np.float64)
    lab_ok = np.zeros(max_lines, dtype=np.bool_)
    indptr = np.zeros(max_lines + 1, dtype=np.int64)
    idx = np.empty(max_nnz, dtype=np.int32)  # indices are checked to fit
    val = np.empty(max_nnz, dtype=np.float64)
    arrays = (lab, lab_v, lab_ok, indptr, idx, val)
    k, n, m = _scan_plain(buf, *arrays, _POW10)
    ns, slow, err, err_line = 0, np.empty((0, 3), dtype=np.int64), 0, 0
    if k < buf.shape[0]:  # something _scan_plain does not take: the general scan from there
        n, m, ns, slow, err, err_line = _scan(buf, k, n, m, *arrays, _POW10)
    line_of = lab[:n, 2]
    if err:
        raise MalformedBody(f"svmlight line {err_line + 1}: {_ERRORS[err]}", index=err_line)
    idx, val = idx[:m], val[:m]
    for k, s, e in slow[:ns].tolist():
        val[k] = float(text[s:e])
    if transform not in ("none", "log1p"):
        raise ValueError(f"transform must be none or log1p, got {transform!r}")
    bad, ordered, zeros = _inspect(indptr[: n + 1], idx, val, MAX_ABS_VALUE)
    if bad >= 0:
        row = int(np.searchsorted(indptr[1 : n + 1], bad, side="right"))
        line = int(line_of[row])
        raise MalformedBody(
            f"svmlight line {line + 1}: a feature value is not finite or |v| > {MAX_ABS_VALUE:g}",
            index=line,
        )
    if transform == "log1p":
        val = np.copysign(np.log1p(np.abs(val)), val)
    indptr = indptr[: n + 1]
    too_many = -1
    if not normalize and ordered:  # the usual file: no sort
        if zeros == 0:
            out_ptr, out_idx, out_val = indptr, idx, val
        else:
            kept = _drop_zeros(indptr, idx, val)
            out_ptr, out_idx, out_val = indptr, idx[:kept], val[:kept]
    else:
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
        out_ptr, out_idx, out_val, too_many = assemble(
            rows, idx.astype(np.int64), val, n, (1 << 62) - 1, normalize, 1 << 20
        )
    if too_many >= 0:
        raise MalformedBody(
            f"svmlight line {int(line_of[too_many]) + 1}: more than 2**20 features", index=too_many
        )
    numeric = bool(lab_ok[:n].all())
    labels = None if numeric else [text[s:e] for s, e, _ in lab[:n].tolist()]
    return Parsed(
        out_ptr,
        out_idx,
        out_val,
        lab_v[:n].copy() if numeric else None,
        labels,
        line_of.copy(),
        int(idx.max()) if m else -1,
    )


__all__ = ["Parsed", "parse_svmlight", "read_svmlight_file"]
