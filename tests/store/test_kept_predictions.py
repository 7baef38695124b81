"""Kept predictions (service/store/feedback.py): the compact format 3 and the format 2 still
read, row by row, exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.errors import DecodeError
from service.learning.features import Batch
from service.store.feedback import decode_row, encode_batch, encode_batch_v2


def group() -> Batch:
    nan = np.array([0x7FF8_0000_DEAD_BEEF], dtype="<u8").view("<f8")[0]
    return Batch(
        np.array([0, 3, 3, 5], dtype=np.int64),
        np.array([1, 70_000, 2**31 - 1, 9, 4], dtype=np.int32),  # the last row unsorted
        np.array([-0.0, nan, 5e-324, 1.5, -np.inf]),
        np.full(3, -1, dtype=np.int32),
    )


@pytest.mark.parametrize("encode", [encode_batch, encode_batch_v2])
def test_every_row_comes_back_bit_exact(encode: object) -> None:
    b = group()
    raw = encode(b)  # type: ignore[operator]
    for row in range(b.n):
        lo, hi = int(b.indptr[row]), int(b.indptr[row + 1])
        indices, data = decode_row(raw, row)
        assert indices.dtype == np.int32 and data.dtype == np.float64
        assert indices.tobytes() == b.indices[lo:hi].tobytes()
        assert data.tobytes() == b.data[lo:hi].tobytes()  # NaN payload, -0.0, subnormal
    for row in (-1, b.n):
        with pytest.raises(IndexError):
            decode_row(raw, row)


def test_a_kept_text_costs_a_fifth_of_format_2() -> None:
    """One SMS-sized prediction (~90 sorted hashed n-grams, ±1/√n): ~215 bytes, not ~1,100."""
    rng = np.random.default_rng(1)
    idx = np.sort(rng.choice(2**20, 90, replace=False))
    b = Batch.from_rows([(idx.tolist(), [1 / math.sqrt(90)] * 90)], [-1])
    assert len(encode_batch(b)) < 0.25 * len(encode_batch_v2(b))
    indices, data = decode_row(encode_batch(b), 0)
    assert indices.tolist() == idx.tolist() and data.tolist() == [1 / math.sqrt(90)] * 90


@pytest.mark.parametrize("raw", [b"", b"\x03", b"\x03\x02\x00", b"\x09abc", b"\x02\x01"])
def test_garbage_is_a_decode_error(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_row(raw, 0)
