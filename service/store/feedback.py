"""Features kept with predictions, so that feedback can learn from them later.

One predict call (or one micro-batched group of them) keeps its whole sparse batch under one
key, ``Keys.prediction(m, group)``, with a TTL (the model's ``feedback_ttl``, else
``settings.feedback_ttl_s``); each prediction's id is ``<group>-<row>``. When feedback
arrives the API takes that row back and appends it with the given label; after the TTL the id
is unknown (404). Keeping a batch of 1,000 predictions is one SET, not 1,000; several groups
go out in one pipelined round trip (no MULTI: each key stands alone).

Value format: format byte ``3`` then the batch as a stream entry stores it
(``codec.encode_batch``, format 2: varint row lengths, gap-coded indices, one magnitude per
row for L2-normalised binary text) — ~2.3 bytes a non-zero for hashed text instead of 12.
Format ``2`` (written before; still read while such keys live out their TTL): format byte,
``uint32`` rows, ``uint32`` nnz, then ``int64`` indptr, ``int32`` indices and ``float64``
values.

The per-model TTL is kept as the ``feedback_ttl`` field of the model's spec hash, written by
the create script together with the spec (creation is atomic: a model is never seen without
the TTL it was created with), and deleted with it.
The methods are :class:`Store`'s (a mixin, under the same ``guarded`` mapping of connection
failures to ``StoreUnavailable`` as every other store call).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from service.errors import DecodeError, PredictionNotFound
from service.learning.batch import Batch
from service.store import codec
from service.store.base import StoreBase, guarded

FORMAT = 3  # a codec batch follows
FORMAT_V2 = 2
_HEAD = struct.Struct("<BII")
TTL_FIELD = "feedback_ttl"


MAX_ROW_DIGITS = 9  # a kept group holds at most max_batch (≤ 10**9) rows


def parse_prediction_id(pid: str) -> tuple[str, int] | None:
    """``"<group>-<row>"`` → ``(group, row)``, or None when ``pid`` cannot be one of ours.

    Strict: ``row`` is 1 to 9 ASCII digits (``str.isdigit`` alone would take '²' or '٣', which
    ``int`` then refuses).

    >>> parse_prediction_id("5f0c-12"), parse_prediction_id("5f0c-²"), parse_prediction_id("-1")
    (('5f0c', 12), None, None)
    """
    group, _, row = pid.rpartition("-")
    if not group or not 0 < len(row) <= MAX_ROW_DIGITS or not (row.isascii() and row.isdigit()):
        return None
    return group, int(row)


def encode_batch(batch: Batch) -> bytes:
    """What a kept prediction group stores (format 3)."""
    return bytes([FORMAT]) + codec.encode_batch(batch)


def encode_batch_v2(batch: Batch) -> bytes:
    """Format 2, as kept before format 3 (still decoded)."""
    return (
        _HEAD.pack(FORMAT_V2, batch.n, batch.nnz)
        + np.ascontiguousarray(batch.indptr, dtype="<i8").tobytes()
        + np.ascontiguousarray(batch.indices, dtype="<i4").tobytes()
        + np.ascontiguousarray(batch.data, dtype="<f8").tobytes()
    )


def decode_row(raw: bytes, row: int) -> tuple[np.ndarray, np.ndarray]:
    """Row ``row`` of a kept batch: (indices, values)."""
    if raw[:1] == bytes([FORMAT]):
        try:
            batch, _ = codec.decode_batch(memoryview(raw)[1:])
        except DecodeError as exc:
            raise DecodeError(f"kept prediction cannot be decoded: {exc.message}") from exc
        if not 0 <= row < batch.n:
            raise IndexError(row)
        lo, hi = int(batch.indptr[row]), int(batch.indptr[row + 1])
        return batch.indices[lo:hi].copy(), batch.data[lo:hi].copy()
    try:
        fmt, n, nnz = _HEAD.unpack_from(raw)
        if fmt != FORMAT_V2:
            raise ValueError(f"unknown kept-prediction format {fmt}")
        if not 0 <= row < n:
            raise IndexError(row)
        off = _HEAD.size
        indptr = np.frombuffer(raw, dtype="<i8", count=n + 1, offset=off)
        lo, hi = int(indptr[row]), int(indptr[row + 1])
        off_i = off + 8 * (n + 1)
        off_d = off_i + 4 * nnz
        indices = np.frombuffer(raw, dtype="<i4", count=hi - lo, offset=off_i + 4 * lo)
        data = np.frombuffer(raw, dtype="<f8", count=hi - lo, offset=off_d + 8 * lo)
    except (struct.error, ValueError) as exc:
        raise DecodeError(f"kept prediction cannot be decoded: {exc}") from exc
    return indices.astype(np.int32), data.astype(np.float64)


class FeedbackOps(StoreBase):
    """The kept predictions and each model's feedback TTL, as methods of :class:`Store`."""

    @guarded
    async def keep_predictions(self, items: Sequence[tuple[str, str, Batch, int]]) -> None:
        """Keep each ``(model, group, batch, ttl_s)`` in one pipelined round trip."""
        async with self.client.pipeline(transaction=False) as pipe:
            for m, group, batch, ttl_s in items:
                pipe.set(self.keys.prediction(m, group), encode_batch(batch), ex=max(1, int(ttl_s)))
            await pipe.execute()

    @guarded
    async def take_prediction(self, m: str, pid: str) -> Batch:
        """The kept row of prediction ``pid`` (y = -1), or ``PredictionNotFound`` (unknown or
        expired)."""
        unknown = PredictionNotFound(
            f"prediction_id {pid[:80]!r} is unknown or expired for model {m!r}",
            field="prediction_id",
        )
        parsed = parse_prediction_id(pid)
        if parsed is None:
            raise unknown
        group, row = parsed
        try:
            key = self.keys.prediction(m, group)
        except ValueError as exc:
            raise unknown from exc
        raw: Any = await self.client.get(key)  # bytes: the client does not decode replies
        if raw is None:
            raise unknown
        try:
            indices, data = decode_row(raw, row)
        except IndexError as exc:
            raise unknown from exc
        return Batch(
            np.array([0, indices.shape[0]], dtype=np.int64),
            indices,
            data,
            np.full(1, -1, np.int32),
        )

    @guarded
    async def feedback_ttl(self, m: str) -> int | None:
        """The model's own feedback TTL (written with its spec by ``create_model``), or None:
        the service's default applies."""
        raw = await self.client.hget(self.keys.spec(m), TTL_FIELD)
        return int(raw) if raw is not None else None


__all__ = ["TTL_FIELD", "FeedbackOps", "decode_row", "encode_batch", "parse_prediction_id"]
