"""Binary formats: a stream entry ↔ a :class:`Batch`, a state dict ↔ bytes.

Both formats start with a format byte so that a later format can be read beside this one.
Arrays are stored raw (little-endian, 8-byte aligned) after a small header, so decoding is a
handful of ``np.frombuffer`` calls — no per-example Python — and exact to the bit.

Batch entry (format 1)::

    byte 0       0x01
    byte 1       flags: 1 = data stored as float32, 2 = indices stored as uint16
    bytes 2..7   padding
    bytes 8..31  n, nnz, ids_len as little-endian uint64
    then         indptr int64[n+1] · data float64[nnz] · indices int32[nnz] · y int32[n]
                 (each padded to 8 bytes) · ids as orjson (ids_len bytes, may be 0)

The narrow forms are used only when they are exact (every value survives float32, every
index is below 65,536): binary and count features, small dims, cost 6 or 4 bytes a
non-zero on the wire and in Redis instead of 12, and decode to the same float64/int32.

State blob (format 1)::

    byte 0       0x01
    bytes 1..7   padding
    bytes 8..15  header length h (uint64)
    then         header: orjson {"scalars": {name: [kind, value]}, "arrays": [[name, dtype,
                 shape, offset, nbytes], ...]}, padded to 8 · raw arrays (offsets relative
                 to the end of the padded header)

Scalars keep their kind: ``i`` int, ``f`` float (as ``float.hex`` so inf/nan round-trip),
``b`` bool, ``s`` str, ``n`` None.

>>> import numpy as np
>>> s = decode_state(encode_state({"w": np.arange(3.0), "t": 7, "eta": 0.5}))
>>> s["w"].tolist(), s["t"], s["eta"]
([0.0, 1.0, 2.0], 7, 0.5)
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from service.errors import DecodeError
from service.learning.features import Batch

BATCH_FORMAT = 1
STATE_FORMAT = 1
_BATCH_HEAD = struct.Struct("<BB6xQQQ")
DATA_F32, INDICES_U16 = 1, 2
_STATE_HEAD = struct.Struct("<B7xQ")

StateValue = Any  # np.ndarray | int | float | bool | str | None


def _pad(n: int) -> int:
    return (-n) % 8


# --- batches -----------------------------------------------------------------------------


def encode_batch(batch: Batch, ids: Sequence[str | None] | None = None) -> bytes:
    """Encode a batch (and optionally its example ids) as one stream entry payload."""
    ids_bytes = b"" if ids is None else orjson.dumps(list(ids))
    n, nnz = batch.n, batch.nnz
    data: np.ndarray = np.ascontiguousarray(batch.data, dtype="<f8")
    indices: np.ndarray = np.ascontiguousarray(batch.indices, dtype="<i4")
    flags = 0
    if nnz:
        with np.errstate(over="ignore", invalid="ignore"):
            narrow = data.astype("<f4")
        if np.array_equal(narrow.astype("<f8"), data):  # exact (NaN never is: kept wide)
            data, flags = narrow, flags | DATA_F32
        if int(indices.min()) >= 0 and int(indices.max()) < 65536:
            indices, flags = indices.astype("<u2"), flags | INDICES_U16
    parts = [_BATCH_HEAD.pack(BATCH_FORMAT, flags, n, nnz, len(ids_bytes))]
    for arr, dtype in (
        (batch.indptr, "<i8"),
        (data, data.dtype.str),
        (indices, indices.dtype.str),
        (batch.y, "<i4"),
    ):
        raw = np.ascontiguousarray(arr, dtype=dtype).tobytes()
        parts.append(raw)
        parts.append(b"\0" * _pad(len(raw)))
    parts.append(ids_bytes)
    return b"".join(parts)


def decode_batch(payload: bytes | bytearray | memoryview) -> tuple[Batch, list[str | None] | None]:
    """Decode a stream entry payload; raise :class:`DecodeError` if it is not a valid batch.

    The arrays are writable copies (one memcpy of the payload), checked for shape and CSR
    consistency; value ranges (indices below ``dim``, labels in range) are the worker's job.
    """
    try:
        buf = bytearray(payload)
        fmt, flags, n, nnz, ids_len = _BATCH_HEAD.unpack_from(buf, 0)
        if fmt != BATCH_FORMAT:
            raise ValueError(f"unknown batch format {fmt}")
        if flags & ~(DATA_F32 | INDICES_U16):
            raise ValueError(f"unknown batch flags {flags}")
        data_dtype = "<f4" if flags & DATA_F32 else "<f8"
        index_dtype = "<u2" if flags & INDICES_U16 else "<i4"
        off = _BATCH_HEAD.size
        arrays: list[np.ndarray] = []
        for dtype, count in (("<i8", n + 1), (data_dtype, nnz), (index_dtype, nnz), ("<i4", n)):
            size = np.dtype(dtype).itemsize * count
            if off + size > len(buf):
                raise ValueError("truncated batch")
            arrays.append(np.frombuffer(buf, dtype=dtype, count=count, offset=off))
            off += size + _pad(size)
        if off + ids_len != len(buf):
            raise ValueError(f"batch length {len(buf)} does not match its header")
        indptr, data, indices, y = arrays
        if indptr[0] != 0 or indptr[-1] != nnz or (n > 0 and np.any(np.diff(indptr) < 0)):
            raise ValueError("inconsistent indptr")
        ids: list[str | None] | None = None
        if ids_len:
            ids = orjson.loads(bytes(buf[off:]))
            if not isinstance(ids, list) or len(ids) != n:
                raise ValueError("ids do not match the number of rows")
        batch = Batch(
            indptr.astype(np.int64, copy=False),
            indices.astype(np.int32, copy=False),
            data.astype(np.float64, copy=False),
            y.astype(np.int32, copy=False),
        )
        return batch, ids
    except DecodeError:
        raise
    except Exception as e:
        raise DecodeError(f"cannot decode batch: {e}") from e


# --- states ------------------------------------------------------------------------------


def _scalar(name: str, value: Any) -> list[Any]:
    if value is None:
        return ["n", None]
    if isinstance(value, bool | np.bool_):
        return ["b", bool(value)]
    if isinstance(value, int | np.integer):
        return ["i", int(value)]
    if isinstance(value, float | np.floating):
        return ["f", float(value).hex()]
    if isinstance(value, str):
        return ["s", value]
    raise TypeError(f"state field {name!r} has unsupported type {type(value).__name__}")


def _unscalar(kind: str, value: Any) -> Any:
    if kind == "n":
        return None
    if kind == "b":
        return bool(value)
    if kind == "i":
        return int(value)
    if kind == "f":
        return float.fromhex(value)
    if kind == "s":
        return str(value)
    raise ValueError(f"unknown scalar kind {kind!r}")


def encode_state(state: Mapping[str, StateValue]) -> bytes:
    """Encode a dict of arrays and scalars exactly (dtype, shape and every bit kept)."""
    scalars: dict[str, list[Any]] = {}
    arrays: list[list[Any]] = []
    chunks: list[bytes] = []
    off = 0
    for name, value in state.items():
        if not isinstance(name, str):
            raise TypeError(f"state keys must be strings, got {name!r}")
        if isinstance(value, np.ndarray):
            if value.dtype.hasobject:
                raise TypeError(f"state field {name!r} is an object array")
            dtype = value.dtype.newbyteorder("<") if value.dtype.byteorder == ">" else value.dtype
            raw = np.ascontiguousarray(value, dtype=dtype).tobytes()
            arrays.append([name, dtype.str, list(value.shape), off, len(raw)])
            chunks.append(raw)
            chunks.append(b"\0" * _pad(len(raw)))
            off += len(raw) + _pad(len(raw))
        else:
            scalars[name] = _scalar(name, value)
    header = orjson.dumps({"scalars": scalars, "arrays": arrays})
    return b"".join(
        [_STATE_HEAD.pack(STATE_FORMAT, len(header)), header, b"\0" * _pad(len(header)), *chunks]
    )


def decode_state(payload: bytes | bytearray | memoryview) -> dict[str, StateValue]:
    """Decode :func:`encode_state`'s output (writable arrays); :class:`DecodeError` otherwise."""
    try:
        buf = bytearray(payload)
        fmt, hlen = _STATE_HEAD.unpack_from(buf, 0)
        if fmt != STATE_FORMAT:
            raise ValueError(f"unknown state format {fmt}")
        start = _STATE_HEAD.size
        if start + hlen > len(buf):
            raise ValueError("truncated state header")
        header = orjson.loads(bytes(buf[start : start + hlen]))
        base = start + hlen + _pad(hlen)
        out: dict[str, StateValue] = {}
        for name, (kind, value) in header["scalars"].items():
            out[name] = _unscalar(kind, value)
        end = base
        for name, dtype_str, shape, off, nbytes in header["arrays"]:
            dtype = np.dtype(dtype_str)
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            if count * dtype.itemsize != nbytes or base + off + nbytes > len(buf):
                raise ValueError(f"array {name!r} does not fit the payload")
            arr = np.frombuffer(buf, dtype=dtype, count=count, offset=base + off)
            out[name] = arr.reshape(shape)
            end = max(end, base + off + nbytes + _pad(nbytes))
        if end != len(buf):
            raise ValueError(f"state length {len(buf)} does not match its header")
        return out
    except DecodeError:
        raise
    except Exception as e:
        raise DecodeError(f"cannot decode state: {e}") from e
