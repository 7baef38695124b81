"""The sparse batch every learner takes, and the compiled assembly of CSR rows.

A :class:`Batch` is a CSR matrix plus labels. Rows have unique, sorted column indices, so
‖x‖² is the sum of the squared values of a row and the compiled loops need no dedup.
:func:`assemble` turns (row, code, value) triplets into that form; the featurizer and the
svmlight reader both build their batches with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit


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

    def take(self, rows: Sequence[int] | np.ndarray) -> Batch:
        """The rows ``rows`` (in that order) as a batch (copies).

        >>> b = Batch.from_rows([([0], [1.0]), ([1, 2], [2.0, 3.0]), ([3], [4.0])], [0, 1, 0])
        >>> t = b.take([2, 1])
        >>> t.indptr.tolist(), t.indices.tolist(), t.y.tolist()
        ([0, 1, 3], [3, 1, 2], [0, 1])
        """
        sel = np.asarray(rows, dtype=np.int64)
        starts = self.indptr[sel]
        counts = self.indptr[sel + 1] - starts
        indptr = np.zeros(sel.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        at = np.repeat(starts - indptr[:-1], counts) + np.arange(indptr[-1], dtype=np.int64)
        return Batch(indptr, self.indices[at], self.data[at], self.y[sel])

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
def assemble(
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
