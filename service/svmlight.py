"""A fast svmlight / libsvm reader: ``LABEL idx:val idx:val ... [# comment]`` per line.

The whole buffer is scanned by one compiled loop (token boundaries, integer indices and
decimal values), so Python touches each *distinct label* once, not each token. Values are
parsed exactly: a decimal with at most 15 significant digits and a power of ten within
10^±22 is ``mantissa × 10^e`` or ``mantissa / 10^−e`` — one correctly rounded operation on
two exact doubles, hence the same double as ``float(text)``; anything longer falls back to
``float()`` for that token. ``qid:`` tokens are skipped; blank and comment-only lines too.

Indices are used as given (no hashing); rows come out sorted with duplicates summed and
zeros dropped (the :class:`~service.learning.features.Batch` contract).

>>> parsed = parse_svmlight(b"+1 3:0.5 1:2\\n# a comment\\n-1 2:1e-3 # tail\\n")
>>> parsed.label_values.tolist(), parsed.batch_arrays()[0].tolist(), parsed.max_index
([1.0, -1.0], [0, 2, 3], 3)
>>> parse_svmlight(b"ham 1:1\\nspam 2:1").labels
[b'ham', b'spam']
>>> parsed.batch_arrays()[1].tolist(), parsed.batch_arrays()[2].tolist()
([1, 3, 2], [2.0, 0.5, 0.001])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from service.errors import MalformedBody
from service.learning.features import MAX_ABS_VALUE, _assemble

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


@njit(cache=True, nogil=True)
def _parse_decimal(buf: np.ndarray, s: int, e: int, pow10: np.ndarray) -> tuple[int, float]:
    """(status, value) of ``buf[s:e]``: 1 parsed exactly, 2 valid but needs ``float()``,
    0 not a decimal number."""
    if s >= e:
        return 0, 0.0
    k = s
    neg = False
    if buf[k] == 43 or buf[k] == 45:  # + -
        neg = buf[k] == 45
        k += 1
    mant = 0
    sig = 0
    digits = 0
    exp10 = 0
    while k < e and 48 <= buf[k] <= 57:
        d = buf[k] - 48
        digits += 1
        if sig > 0 or d != 0:
            if sig < 18:
                mant = mant * 10 + d
            else:
                exp10 += 1
            sig += 1
        k += 1
    if k < e and buf[k] == 46:  # .
        k += 1
        while k < e and 48 <= buf[k] <= 57:
            d = buf[k] - 48
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
        return 0, 0.0
    if k < e and (buf[k] == 101 or buf[k] == 69):  # e E
        k += 1
        eneg = False
        if k < e and (buf[k] == 43 or buf[k] == 45):
            eneg = buf[k] == 45
            k += 1
        ed = 0
        ev = 0
        while k < e and 48 <= buf[k] <= 57:
            if ev < 100000:
                ev = ev * 10 + (buf[k] - 48)
            ed += 1
            k += 1
        if ed == 0:
            return 0, 0.0
        exp10 += -ev if eneg else ev
    if k != e:
        return 0, 0.0
    if mant == 0:
        return 1, -0.0 if neg else 0.0
    if sig > 15 or exp10 > 22 or exp10 < -22:
        return 2, 0.0
    v = mant * pow10[exp10] if exp10 >= 0 else mant / pow10[-exp10]
    return 1, -v if neg else v


@njit(cache=True, nogil=True)
def _parse_features(
    buf: np.ndarray,
    q: int,
    end: int,
    idx: np.ndarray,
    val: np.ndarray,
    m: int,
    slow: np.ndarray,
    ns: int,
    pow10: np.ndarray,
) -> tuple[int, int, int]:
    """Parse the ``idx:val`` tokens of ``buf[q:end]``; returns (m, ns, error code or 0)."""
    while True:
        while q < end and _is_space(buf[q]):
            q += 1
        if q >= end:
            return m, ns, 0
        ts = q
        colon = -1
        while q < end and not _is_space(buf[q]):
            if buf[q] == 58 and colon < 0:
                colon = q
            q += 1
        if colon < 0:
            return m, ns, 1
        if colon - ts == 3 and buf[ts] == 113 and buf[ts + 1] == 105 and buf[ts + 2] == 100:
            continue  # qid:N
        if colon == ts:
            return m, ns, 2
        j = 0
        for t in range(ts, colon):
            c = buf[t]
            if c < 48 or c > 57:
                return m, ns, 2
            j = j * 10 + (c - 48)
            if j > 2147483646:
                return m, ns, 4
        status, v = _parse_decimal(buf, colon + 1, q, pow10)
        if status == 0:
            return m, ns, 3
        if status == 2:
            slow[ns, 0] = m
            slow[ns, 1] = colon + 1
            slow[ns, 2] = q
            ns += 1
        idx[m] = j
        val[m] = v
        m += 1


@njit(cache=True, nogil=True)
def _scan(buf: np.ndarray, max_lines: int, max_nnz: int, pow10: np.ndarray):  # type: ignore[no-untyped-def]
    """One pass over the buffer. Per row: label span, numeric label (if it is one), line;
    CSR of the features; the tokens ``float()`` must finish; an error code and its line."""
    n_buf = buf.shape[0]
    lab = np.empty((max_lines, 3), dtype=np.int64)  # label start, label end, line
    lab_v = np.empty(max_lines, dtype=np.float64)
    lab_ok = np.zeros(max_lines, dtype=np.bool_)
    indptr = np.zeros(max_lines + 1, dtype=np.int64)
    idx = np.empty(max_nnz, dtype=np.int64)
    val = np.empty(max_nnz, dtype=np.float64)
    slow = np.empty((max_nnz, 3), dtype=np.int64)  # value position, token start, token end
    n = 0
    m = 0
    ns = 0
    pos = 0
    line = 0
    err = 0
    while pos < n_buf:
        eol = pos
        while eol < n_buf and buf[eol] != 10:
            eol += 1
        end = pos
        while end < eol and buf[end] != 35:  # '#': a comment runs to the end of the line
            end += 1
        q = pos
        while q < end and _is_space(buf[q]):
            q += 1
        if q < end:
            ls = q
            while q < end and not _is_space(buf[q]):
                q += 1
            lab[n, 0] = ls
            lab[n, 1] = q
            lab[n, 2] = line
            status, v = _parse_decimal(buf, ls, q, pow10)
            lab_v[n] = v
            lab_ok[n] = status == 1
            m, ns, err = _parse_features(buf, q, end, idx, val, m, slow, ns, pow10)
            if err:
                break
            n += 1
            indptr[n] = m
        line += 1
        pos = eol + 1
    return n, m, ns, lab, lab_v, lab_ok, indptr, idx, val, slow, err, line


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

    def batch_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.indptr, self.indices, self.data


def parse_svmlight(text: bytes, *, normalize: bool = False, transform: str = "none") -> Parsed:
    """Parse a whole svmlight buffer; ``MalformedBody`` names the (1-based) line at fault.

    ``transform="log1p"`` and ``normalize`` act as in the featurizer (values, then rows)."""
    buf = np.frombuffer(text, dtype=np.uint8)
    max_lines = int(np.count_nonzero(buf == 10)) + 1
    max_nnz = int(np.count_nonzero(buf == 58))
    n, m, ns, lab, lab_v, lab_ok, indptr, idx, val, slow, err, err_line = _scan(
        buf, max_lines, max_nnz, _POW10
    )
    line_of = lab[:n, 2]
    if err:
        raise MalformedBody(f"svmlight line {err_line + 1}: {_ERRORS[err]}", index=err_line)
    idx, val = idx[:m], val[:m]
    for k, s, e in slow[:ns].tolist():
        val[k] = float(text[s:e])
    bad = ~(np.abs(val) <= MAX_ABS_VALUE)
    if bad.any():
        row = int(np.searchsorted(indptr[1 : n + 1], int(np.argmax(bad)), side="right"))
        line = int(line_of[row])
        raise MalformedBody(
            f"svmlight line {line + 1}: a feature value is not finite or |v| > {MAX_ABS_VALUE:g}",
            index=line,
        )
    if transform == "log1p":
        val = np.copysign(np.log1p(np.abs(val)), val)
    elif transform != "none":
        raise ValueError(f"transform must be none or log1p, got {transform!r}")
    indptr = indptr[: n + 1]
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    out_ptr, out_idx, out_val, too_many = _assemble(
        rows, idx, val, n, (1 << 62) - 1, normalize, 1 << 20
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


__all__ = ["Parsed", "parse_svmlight"]
