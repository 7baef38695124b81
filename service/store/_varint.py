"""Compiled LEB128 loops for the batch codec (format 2): a varint a byte at a time is what
numpy does worst (segmented reductions) and a plain loop does best.

Values are below 2**35 (at most 5 bytes: this codec writes values below 2**32). Decoding
returns an error code instead of raising, so the caller can turn it into its own message.
"""

from __future__ import annotations

import numpy as np
from numba import njit

MAX_BYTES = 5
OK, SHORT, LONG, TRAILING, RANGE = 0, 1, 2, 3, 4
MESSAGES = {
    SHORT: "fewer varints than the header says",
    LONG: "a varint is too long",
    TRAILING: "bytes left after the varints",
    RANGE: "an index or label is outside the int32 range",
}


@njit(cache=True, nogil=True)
def _read(buf: np.ndarray, pos: int) -> tuple[np.uint64, int, int]:  # pragma: no cover
    v = np.uint64(0)
    shift = np.uint64(0)
    for _ in range(MAX_BYTES):
        if pos >= buf.shape[0]:
            return v, pos, SHORT
        b = np.uint64(buf[pos])
        pos += 1
        v |= (b & np.uint64(127)) << shift
        if b < 128:
            return v, pos, OK
        shift += np.uint64(7)
    return v, pos, LONG


@njit(cache=True, nogil=True)
def _signed(u: np.uint64) -> np.int64:  # pragma: no cover - compiled
    """Zigzag back: 0, 1, 2, 3 … → 0, -1, 1, -2 …"""
    return np.int64(u >> np.uint64(1)) ^ -np.int64(u & np.uint64(1))


@njit(cache=True, nogil=True)
def decode_rows(
    buf: np.ndarray, n: int, nnz: int, gaps: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:  # pragma: no cover - compiled
    """The varint section of a format-2 batch: ``n`` row lengths, ``n`` zigzag labels, then
    ``nnz`` indices (per row the first then the differences when ``gaps``, else zigzag), and
    nothing after. Returns ``(indptr int64, y int32, indices int32, error code)``."""
    indptr = np.zeros(n + 1, dtype=np.int64)
    y = np.zeros(n, dtype=np.int32)
    indices = np.zeros(nnz, dtype=np.int32)
    lo, hi = -(2**31), 2**31 - 1
    pos = 0
    for i in range(n):
        v, pos, err = _read(buf, pos)
        if err != OK:
            return indptr, y, indices, err
        if v > np.uint64(nnz):
            return indptr, y, indices, SHORT
        indptr[i + 1] = indptr[i] + np.int64(v)
    if indptr[n] != nnz:
        return indptr, y, indices, SHORT
    for i in range(n):
        v, pos, err = _read(buf, pos)
        if err != OK:
            return indptr, y, indices, err
        s = _signed(v)
        if s < lo or s > hi:
            return indptr, y, indices, RANGE
        y[i] = s
    for i in range(n):
        prev = np.int64(0)
        for k in range(indptr[i], indptr[i + 1]):
            v, pos, err = _read(buf, pos)
            if err != OK:
                return indptr, y, indices, err
            x = prev + np.int64(v) if gaps else _signed(v)
            if x < lo or x > hi:
                return indptr, y, indices, RANGE
            indices[k] = x
            prev = x
    if pos != buf.shape[0]:
        return indptr, y, indices, TRAILING
    return indptr, y, indices, OK


@njit(cache=True, nogil=True)
def _put(out: np.ndarray, j: int, v: np.uint64) -> int:  # pragma: no cover - compiled
    while v >= 128:
        out[j] = np.uint8((v & np.uint64(127)) | np.uint64(128))
        v >>= np.uint64(7)
        j += 1
    out[j] = np.uint8(v)
    return j + 1


@njit(cache=True, nogil=True)
def _zig(x: np.int64) -> np.uint64:  # pragma: no cover - compiled
    return np.uint64((x << 1) ^ (x >> 63))


@njit(cache=True, nogil=True)
def encode_rows(
    indptr: np.ndarray, y: np.ndarray, indices: np.ndarray
) -> tuple[np.ndarray, bool]:  # pragma: no cover - compiled
    """The varint section :func:`decode_rows` reads, and whether the indices are stored as
    gaps (every row strictly increasing from a non-negative first index)."""
    n = indptr.shape[0] - 1
    gaps = True
    for i in range(n):
        lo, hi = indptr[i], indptr[i + 1]
        if hi > lo and indices[lo] < 0:
            gaps = False
            break
        for k in range(lo + 1, hi):
            if indices[k] <= indices[k - 1]:
                gaps = False
                break
        if not gaps:
            break
    out = np.empty(MAX_BYTES * (2 * n + indices.shape[0]), dtype=np.uint8)
    j = 0
    for i in range(n):
        j = _put(out, j, np.uint64(indptr[i + 1] - indptr[i]))
    for i in range(n):
        j = _put(out, j, _zig(np.int64(y[i])))
    for i in range(n):
        prev = np.int64(0)
        for k in range(indptr[i], indptr[i + 1]):
            x = np.int64(indices[k])
            j = _put(out, j, np.uint64(x - prev) if gaps else _zig(x))
            prev = x
    return out[:j], gaps
