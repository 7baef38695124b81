"""Features: the sparse batch type the compiled loops take, and (to come) hashing and text.

A :class:`Batch` is a CSR matrix plus labels. Rows have unique, sorted column indices, so
‖x‖² is the sum of the squared values of a row and the compiled loops need no dedup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


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
    def from_rows(
        rows: Sequence[tuple[Sequence[int], Sequence[float]]], y: Sequence[int]
    ) -> Batch:
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
