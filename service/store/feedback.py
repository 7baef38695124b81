"""Features kept with predictions, so that feedback can learn from them later.

A prediction's sparse row is stored under ``Keys.prediction(m, pid)`` with a TTL (the model's
``feedback_ttl``, else ``settings.feedback_ttl_s``): when feedback arrives the API appends that
row with the given label, and after the TTL the id is unknown (404). A batch of predictions is
written with one pipelined round trip (no MULTI: each key stands alone).

Value format (little endian): format byte ``1``, ``uint32`` nnz, then ``int32`` indices and
``float64`` values — decoded with :func:`numpy.frombuffer`, no per-feature Python.

The per-model TTL is kept as the ``feedback_ttl`` field of the model's spec hash, so deleting
the model removes it too.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.errors import DecodeError, PredictionNotFound, StoreUnavailable
from service.learning.features import Batch
from service.store.keys import Keys

FORMAT = 1
_HEAD = struct.Struct("<BI")
TTL_FIELD = "feedback_ttl"


def encode_row(indices: np.ndarray, data: np.ndarray) -> bytes:
    return (
        _HEAD.pack(FORMAT, int(indices.shape[0]))
        + np.ascontiguousarray(indices, dtype="<i4").tobytes()
        + np.ascontiguousarray(data, dtype="<f8").tobytes()
    )


def decode_row(raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    try:
        fmt, nnz = _HEAD.unpack_from(raw)
        if fmt != FORMAT:
            raise ValueError(f"unknown kept-prediction format {fmt}")
        start = _HEAD.size
        indices = np.frombuffer(raw, dtype="<i4", count=nnz, offset=start).astype(np.int32)
        data = np.frombuffer(raw, dtype="<f8", count=nnz, offset=start + 4 * nnz).astype(np.float64)
    except (struct.error, ValueError) as exc:
        raise DecodeError(f"kept prediction cannot be decoded: {exc}") from exc
    return indices, data


def _unavailable(exc: Exception) -> StoreUnavailable:
    return StoreUnavailable(f"Redis is unreachable: {type(exc).__name__}")


async def keep(
    client: aioredis.Redis | Any, keys: Keys, m: str, pids: Sequence[str], batch: Batch, ttl_s: int
) -> None:
    """Store row ``i`` of ``batch`` under prediction id ``pids[i]`` for ``ttl_s`` seconds."""
    await keep_many(client, keys, [(m, pids, batch, ttl_s)])


async def keep_many(
    client: aioredis.Redis | Any,
    keys: Keys,
    items: Sequence[tuple[str, Sequence[str], Batch, int]],
) -> None:
    """Several :func:`keep` calls (any models) in one pipelined round trip."""
    try:
        async with client.pipeline(transaction=False) as pipe:
            for m, pids, batch, ttl_s in items:
                ptr = batch.indptr
                for i, pid in enumerate(pids):
                    lo, hi = int(ptr[i]), int(ptr[i + 1])
                    pipe.set(
                        keys.prediction(m, pid),
                        encode_row(batch.indices[lo:hi], batch.data[lo:hi]),
                        ex=max(1, int(ttl_s)),
                    )
            await pipe.execute()
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise _unavailable(exc) from exc


async def take(client: aioredis.Redis | Any, keys: Keys, m: str, pid: str) -> Batch:
    """The kept row of prediction ``pid`` (y = -1), or ``PredictionNotFound`` (unknown/expired)."""
    try:
        key = keys.prediction(m, pid)
    except ValueError as exc:
        raise PredictionNotFound(
            f"prediction_id {pid[:64]!r} is not valid", field="prediction_id"
        ) from exc
    try:
        raw = await client.get(key)
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise _unavailable(exc) from exc
    if raw is None:
        raise PredictionNotFound(
            f"prediction_id {pid!r} is unknown or expired for model {m!r}", field="prediction_id"
        )
    indices, data = decode_row(bytes(raw) if not isinstance(raw, str) else raw.encode())
    return Batch(
        np.array([0, indices.shape[0]], dtype=np.int64), indices, data, np.full(1, -1, np.int32)
    )


async def set_ttl(client: aioredis.Redis | Any, keys: Keys, m: str, ttl_s: int) -> None:
    try:
        await client.hset(keys.spec(m), TTL_FIELD, int(ttl_s))
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise _unavailable(exc) from exc


async def get_ttl(client: aioredis.Redis | Any, keys: Keys, m: str) -> int | None:
    try:
        raw = await client.hget(keys.spec(m), TTL_FIELD)
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise _unavailable(exc) from exc
    return int(raw) if raw is not None else None
