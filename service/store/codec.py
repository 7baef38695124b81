"""Binary formats: a stream entry ↔ a :class:`Batch`, a state dict ↔ bytes.

Both formats start with a format byte so that a later format can be read beside this one.
Arrays are stored raw (little-endian, 8-byte aligned) after a small header, so decoding is a
handful of ``np.frombuffer`` calls — no per-example Python — and exact to the bit.

Batch entry (format 1)::

    byte 0       0x01
    byte 1       flags: 1 = data stored as float32, 2 = indices stored as uint16,
                 4 = data stored as one magnitude per row (float64[n]) and a sign bit per
                 non-zero (packed, little bit order), 8 = indices stored as 3 bytes
    bytes 2..7   padding
    bytes 8..31  n, nnz, ids_len as little-endian uint64
    then         indptr int64[n+1] · data float64[nnz] · indices int32[nnz] · y int32[n]
                 (each padded to 8 bytes) · ids as orjson (ids_len bytes, may be 0)

Batch entry (format 2, what :func:`encode_batch` writes; format 1 is still read)::

    byte 0       0x02
    byte 1       flags: 1 = data as float32, 4 = data as one magnitude per row and a sign
                 bit per non-zero (as format 1), 16 = indices as gaps (each row's first
                 index, then the differences to the one before: every row strictly
                 increasing, as the featurizer writes them), else as zigzag varints
    then         varints n, nnz, ids_len
    then         data (float64[nnz], float32[nnz], or float64[n] + the packed sign bits)
    then         varints: n row lengths · n zigzag labels · nnz indices (gaps or zigzag)
    then         ids as orjson (ids_len bytes, may be 0)

Varints are LEB128 (7 bits a byte, low first, at most 5 bytes). A hashed index costs about
2.2 bytes (gaps between ~90 sorted indices of 2**20 are below 2**14 three times in four),
a row 2 bytes plus its magnitude: an SMS-sized text with word and character n-grams is
~35% smaller than in format 1, decoded with a handful of vectorised numpy calls.

The narrow forms are used only when they are exact (every value survives float32, every
index is below 65,536 or 2**24, every value of a row has the same magnitude): binary and
count features, small dims, cost 6 or 4 bytes a non-zero on the wire and in Redis instead
of 12; L2-normalised binary text (±1/√n in a row) costs about 3 bytes a non-zero and 8 a
row. All decode to the same float64/int32. (Flags 4 and 8 are newer than flags 1 and 2:
upgrade workers before the API processes that write them.)

State blob (format 1)::

    byte 0       0x01
    bytes 1..7   padding
    bytes 8..15  header length h (uint64)
    then         header: orjson {"scalars": {name: [kind, value]}, "arrays": [[name, dtype,
                 shape, offset, nbytes], ...]}, padded to 8 · raw arrays (offsets relative
                 to the end of the padded header)

Scalars keep their kind: ``i`` int, ``f`` float (as ``float.hex`` so inf/nan round-trip),
``b`` bool, ``s`` str, ``n`` None.

Sparse state blob (format 2): what the state chains and versions store (docs/pipeline.md,
"Redis layout"). Arrays with a *feature axis* (given by :func:`feature_axes`: the ``dim``
axis of a learner's weight arrays) are stored by feature rows: only the rows listed, the
others being zero (a *full* blob) or unchanged (a *delta* blob, applied on top of the blob
before it in a chain); every other array and every scalar is stored whole, in every blob::

    byte 0       0x02
    byte 1       flags: 1 = delta (else full)
    bytes 2..7   padding
    bytes 8..15  header length h (uint64)
    then         header: orjson {"scalars": {...} as format 1, "arrays": [[name, dtype, shape,
                 axis], ...] (axis -1 = stored whole), "rows": r, "raw": bytes before zlib}
    then         zlib(rows as uint32 gaps (the first row, then differences) · per array in
                 header order: the selected rows with the feature axis moved last
                 (``np.moveaxis(np.take(a, rows, axis), axis, -1)``: each column contiguous)
                 or the whole array, raw little-endian)

A row is "zero" only when every bit of it is zero (``-0.0`` and NaN are kept), so decoding
a chain is exact to the bit. :func:`decode_chain` reads a chain: a full blob (format 1 or
2) followed by deltas.

>>> w = np.zeros(8); w[[1, 5]] = [0.5, -0.0]
>>> full = encode_sparse({"w": w, "t": 3}, {"w": 0})
>>> w[2] = 7.0
>>> delta = encode_sparse({"w": w, "t": 4}, {"w": 0}, rows=np.array([2]))
>>> s = decode_chain([full, delta])
>>> s["w"].tolist(), s["t"], is_full_blob(full), is_full_blob(delta)
([0.0, 0.5, 7.0, 0.0, 0.0, -0.0, 0.0, 0.0], 4, True, False)

>>> import numpy as np
>>> s = decode_state(encode_state({"w": np.arange(3.0), "t": 7, "eta": 0.5}))
>>> s["w"].tolist(), s["t"], s["eta"]
([0.0, 1.0, 2.0], 7, 0.5)
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from service.errors import DecodeError
from service.learning.features import Batch
from service.store import _varint as _varint_code

BATCH_FORMAT = 2
BATCH_FORMAT_V1 = 1
STATE_FORMAT = 1
SPARSE_FORMAT = 2
SPARSE_DELTA = 1
REF_KEY = "\0ref"  # where decode_chain leaves a serving blob's references (resolve_serving)
_BATCH_HEAD = struct.Struct("<BB6xQQQ")
DATA_F32, INDICES_U16, ROW_SCALE, INDICES_U24 = 1, 2, 4, 8
INDICES_GAPS = 16  # format 2
_FLAGS = DATA_F32 | INDICES_U16 | ROW_SCALE | INDICES_U24
_FLAGS_V2 = DATA_F32 | ROW_SCALE | INDICES_GAPS
_STATE_HEAD = struct.Struct("<B7xQ")
_SPARSE_HEAD = struct.Struct("<BB6xQ")

StateValue = Any  # np.ndarray | int | float | bool | str | None


def _pad(n: int) -> int:
    return (-n) % 8


# --- batches -----------------------------------------------------------------------------


def encode_batch(batch: Batch, ids: Sequence[str | None] | None = None) -> bytes:
    """Encode a batch (and optionally its example ids) as one stream entry payload
    (format 2: varints; the module docstring)."""
    ids_bytes = b"" if ids is None else orjson.dumps(list(ids))
    n, nnz = batch.n, batch.nnz
    indptr = np.asarray(batch.indptr, dtype=np.int64)
    data: np.ndarray = np.ascontiguousarray(batch.data, dtype="<f8")
    indices = np.asarray(batch.indices, dtype=np.int32)
    flags = 0
    values = data.tobytes()
    if nnz:
        with np.errstate(over="ignore", invalid="ignore"):
            narrow = data.astype("<f4")
        if np.array_equal(narrow.astype("<f8"), data):  # exact (NaN never is: kept wide)
            values, flags = narrow.tobytes(), DATA_F32
        scaled = _row_scale(indptr, data, n, nnz)
        if scaled is not None and len(scaled) < len(values):
            values, flags = scaled, ROW_SCALE
    words, gaps = _varint_code.encode_rows(
        indptr, np.ascontiguousarray(batch.y, dtype=np.int32), np.ascontiguousarray(indices)
    )
    if gaps:
        flags |= INDICES_GAPS
    head = bytes([BATCH_FORMAT, flags]) + _varint(n) + _varint(nnz) + _varint(len(ids_bytes))
    return b"".join([head, values, words.tobytes(), ids_bytes])


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        byte, v = v & 127, v >> 7
        out.append(byte | (128 if v else 0))
        if not v:
            return bytes(out)


def _read_varint(buf: bytes | bytearray, off: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        if off >= len(buf) or shift > 63:
            raise ValueError("truncated or overlong header varint")
        byte = buf[off]
        v |= (byte & 127) << shift
        off, shift = off + 1, shift + 7
        if byte < 128:
            return v, off


def encode_batch_v1(batch: Batch, ids: Sequence[str | None] | None = None) -> bytes:
    """Format 1 (fixed-width arrays, 8-byte aligned): what entries were before format 2;
    still decoded (a stream may hold both while an upgrade rolls out)."""
    ids_bytes = b"" if ids is None else orjson.dumps(list(ids))
    n, nnz = batch.n, batch.nnz
    data: np.ndarray = np.ascontiguousarray(batch.data, dtype="<f8")
    indices: np.ndarray = np.ascontiguousarray(batch.indices, dtype="<i4")
    flags = 0
    data_raw: bytes | None = None
    index_raw: bytes | None = None
    if nnz:
        with np.errstate(over="ignore", invalid="ignore"):
            narrow = data.astype("<f4")
        if np.array_equal(narrow.astype("<f8"), data):  # exact (NaN never is: kept wide)
            data, flags = narrow, flags | DATA_F32
        scaled = _row_scale(batch.indptr, batch.data, n, nnz)
        if scaled is not None and len(scaled) < data.nbytes:
            data_raw, flags = scaled, (flags & ~DATA_F32) | ROW_SCALE
        lo, hi = int(indices.min()), int(indices.max())
        if lo >= 0 and hi < 65536:
            indices, flags = indices.astype("<u2"), flags | INDICES_U16
        elif lo >= 0 and hi < 1 << 24:
            index_raw = indices.astype("<u4").view(np.uint8).reshape(nnz, 4)[:, :3].tobytes()
            flags |= INDICES_U24
    parts = [_BATCH_HEAD.pack(BATCH_FORMAT_V1, flags, n, nnz, len(ids_bytes))]
    for arr, dtype, given in (
        (batch.indptr, "<i8", None),
        (data, data.dtype.str, data_raw),
        (indices, indices.dtype.str, index_raw),
        (batch.y, "<i4", None),
    ):
        raw = given if given is not None else np.ascontiguousarray(arr, dtype=dtype).tobytes()
        parts.append(raw)
        parts.append(b"\0" * _pad(len(raw)))
    parts.append(ids_bytes)
    return b"".join(parts)


def _row_scale(indptr: np.ndarray, data: np.ndarray, n: int, nnz: int) -> bytes | None:
    """``data`` as one magnitude per row and a sign bit per value, if that is exact."""
    counts = np.diff(indptr)
    first = np.minimum(indptr[:-1], nnz - 1)
    scale = np.where(counts > 0, np.abs(data[first]), 0.0).astype("<f8")
    mag = np.abs(data)
    if not np.array_equal(mag.view("<u8"), np.repeat(scale, counts).view("<u8")):
        return None
    signs = np.packbits(np.signbit(data), bitorder="little")
    return scale.tobytes() + signs.tobytes()


def decode_batch(payload: bytes | bytearray | memoryview) -> tuple[Batch, list[str | None] | None]:
    """Decode a stream entry payload; raise :class:`DecodeError` if it is not a valid batch.

    The arrays are writable copies (one memcpy of the payload), checked for shape and CSR
    consistency; value ranges (indices below ``dim``, labels in range) are the worker's job.
    """
    try:
        buf = bytearray(payload)
        if buf[:1] == bytes([BATCH_FORMAT]):
            return _decode_batch_v2(buf)
        fmt, flags, n, nnz, ids_len = _BATCH_HEAD.unpack_from(buf, 0)
        if fmt != BATCH_FORMAT_V1:
            raise ValueError(f"unknown batch format {fmt}")
        if flags & ~_FLAGS or (flags & DATA_F32 and flags & ROW_SCALE):
            raise ValueError(f"unknown batch flags {flags}")
        if flags & INDICES_U16 and flags & INDICES_U24:
            raise ValueError(f"unknown batch flags {flags}")
        data_dtype = "<f4" if flags & DATA_F32 else "<f8"
        index_dtype = "<u2" if flags & INDICES_U16 else "<i4"
        sizes = [
            8 * (n + 1),
            8 * n + (nnz + 7) // 8 if flags & ROW_SCALE else np.dtype(data_dtype).itemsize * nnz,
            3 * nnz if flags & INDICES_U24 else np.dtype(index_dtype).itemsize * nnz,
            4 * n,
        ]
        off = _BATCH_HEAD.size
        sections: list[int] = []
        for size in sizes:
            if off + size > len(buf):
                raise ValueError("truncated batch")
            sections.append(off)
            off += size + _pad(size)
        if off + ids_len != len(buf):
            raise ValueError(f"batch length {len(buf)} does not match its header")
        indptr = np.frombuffer(buf, dtype="<i8", count=n + 1, offset=sections[0])
        y = np.frombuffer(buf, dtype="<i4", count=n, offset=sections[3])
        if indptr[0] != 0 or indptr[-1] != nnz or (n > 0 and np.any(np.diff(indptr) < 0)):
            raise ValueError("inconsistent indptr")
        if flags & ROW_SCALE:
            scale = np.frombuffer(buf, dtype="<f8", count=n, offset=sections[1])
            bits = np.frombuffer(
                buf, dtype=np.uint8, count=(nnz + 7) // 8, offset=sections[1] + 8 * n
            )
            signs = np.unpackbits(bits, count=nnz, bitorder="little").astype(bool)
            mag = np.repeat(scale, np.diff(indptr))
            data = np.where(signs, -mag, mag)
        else:
            data = np.frombuffer(buf, dtype=data_dtype, count=nnz, offset=sections[1])
        if flags & INDICES_U24:
            wide = np.zeros((nnz, 4), dtype=np.uint8)
            wide[:, :3] = np.frombuffer(
                buf, dtype=np.uint8, count=3 * nnz, offset=sections[2]
            ).reshape(nnz, 3)
            indices = wide.view("<u4").reshape(nnz)
        else:
            indices = np.frombuffer(buf, dtype=index_dtype, count=nnz, offset=sections[2])
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


def _decode_batch_v2(buf: bytearray) -> tuple[Batch, list[str | None] | None]:
    flags = buf[1]
    if flags & ~_FLAGS_V2 or (flags & DATA_F32 and flags & ROW_SCALE):
        raise ValueError(f"unknown batch flags {flags}")
    n, off = _read_varint(buf, 2)
    nnz, off = _read_varint(buf, off)
    ids_len, off = _read_varint(buf, off)
    if 2 * n + nnz + ids_len > len(buf):  # every row and non-zero takes a varint byte at least
        raise ValueError(f"batch length {len(buf)} does not match its header")
    width = 4 if flags & DATA_F32 else 8
    vsize = 8 * n + (nnz + 7) // 8 if flags & ROW_SCALE else width * nnz
    end = len(buf) - ids_len
    if off + vsize > end:
        raise ValueError("truncated batch")
    section = np.frombuffer(buf, dtype=np.uint8, count=end - off - vsize, offset=off + vsize)
    indptr, y, indices, err = _varint_code.decode_rows(section, n, nnz, bool(flags & INDICES_GAPS))
    if err:
        raise ValueError(_varint_code.MESSAGES[err])
    counts = np.diff(indptr)
    if flags & ROW_SCALE:
        scale = np.frombuffer(buf, dtype="<f8", count=n, offset=off)
        bits = np.frombuffer(buf, dtype=np.uint8, count=(nnz + 7) // 8, offset=off + 8 * n)
        signs = np.unpackbits(bits, count=nnz, bitorder="little").astype(bool)
        mag = np.repeat(scale, counts)
        data = np.where(signs, -mag, mag)
    else:
        dtype = "<f4" if flags & DATA_F32 else "<f8"
        data = np.frombuffer(buf, dtype=dtype, count=nnz, offset=off).astype(np.float64)
    ids: list[str | None] | None = None
    if ids_len:
        ids = orjson.loads(bytes(buf[end:]))
        if not isinstance(ids, list) or len(ids) != n:
            raise ValueError("ids do not match the number of rows")
    return Batch(indptr, indices, np.ascontiguousarray(data, dtype=np.float64), y), ids


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


# --- sparse states (format 2) ------------------------------------------------------------


def feature_axes(state: Mapping[str, StateValue], dim: int, multiclass: bool) -> dict[str, int]:
    """The feature axis of each array of a learner's state (or serving weights) of ``dim``.

    Binary learners keep arrays of shape ``(dim,)`` or ``(dim, c)`` (axis 0), or ``(c, dim)``
    (axis 1: one row per member, say); multi-class ones ``(K, dim)`` (axis 1). Arrays of any
    other shape (a bias per class…) are stored whole.
    """
    axes: dict[str, int] = {}
    for name, value in state.items():
        if not isinstance(value, np.ndarray) or value.ndim == 0:
            continue
        if multiclass:
            if value.ndim == 2 and value.shape[1] == dim:
                axes[name] = 1
        elif value.shape[0] == dim:
            axes[name] = 0
        elif value.ndim == 2 and value.shape[1] == dim:
            axes[name] = 1
    return axes


def _bits(a: np.ndarray) -> np.ndarray:
    """The array viewed as unsigned integers of its item size (exact zero test: -0.0 != 0)."""
    a = np.ascontiguousarray(a)
    size = a.dtype.itemsize
    if a.dtype.kind in "fiub" and size in (1, 2, 4, 8):
        return a.view(f"<u{size}")
    return a.view(np.uint8)


def nonzero_rows(state: Mapping[str, StateValue], axes: Mapping[str, int]) -> np.ndarray:
    """Sorted feature rows where any array of ``axes`` has a bit set (int64)."""
    mask: np.ndarray | None = None
    for name, axis in axes.items():
        arr = state[name]
        bits = _bits(arr) != 0
        if bits.ndim > 1:
            bits = bits.any(axis=tuple(i for i in range(bits.ndim) if i != axis))
        mask = bits if mask is None else (mask | bits)
    if mask is None:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(mask)


def encode_sparse(
    state: Mapping[str, StateValue],
    axes: Mapping[str, int],
    rows: np.ndarray | None = None,
    *,
    ref: Mapping[str, tuple[str, int | None]] | None = None,
    level: int = 1,
) -> bytes:
    """Encode ``state`` as a format-2 blob: full (``rows`` None: every non-zero feature row)
    or a delta holding only ``rows`` (sorted or not, duplicates allowed) of the arrays with a
    feature axis. The other arrays and the scalars are always stored whole.

    ``ref`` (serving weights only) names arrays *not* stored because they equal an array of
    the version's learner state, or one column of it: ``{"W": ("wgs", 0)}``; reading them
    needs that state (:func:`resolve_serving`)."""
    delta = rows is not None
    if rows is None:
        picked = nonzero_rows(state, axes)
    else:
        picked = np.unique(np.asarray(rows, dtype=np.int64))
    gaps = np.diff(picked, prepend=0).astype("<u4") if picked.size else np.zeros(0, "<u4")
    scalars: dict[str, list[Any]] = {}
    arrays: list[list[Any]] = []
    chunks: list[bytes] = [gaps.tobytes()]
    for name, value in state.items():
        if not isinstance(name, str):
            raise TypeError(f"state keys must be strings, got {name!r}")
        if ref and name in ref:
            continue
        if not isinstance(value, np.ndarray):
            scalars[name] = _scalar(name, value)
            continue
        if value.dtype.hasobject:
            raise TypeError(f"state field {name!r} is an object array")
        dtype = value.dtype.newbyteorder("<") if value.dtype.byteorder == ">" else value.dtype
        axis = axes.get(name, -1)
        # feature axis last: each column (w, G, s…) is contiguous, which compresses better
        part = np.moveaxis(np.take(value, picked, axis=axis), axis, -1) if axis >= 0 else value
        chunks.append(np.ascontiguousarray(part, dtype=dtype).tobytes())
        arrays.append([name, dtype.str, list(value.shape), axis])
    raw = b"".join(chunks)
    head: dict[str, Any] = {
        "scalars": scalars, "arrays": arrays, "rows": int(picked.size), "raw": len(raw)
    }  # fmt: skip
    if ref:
        head["ref"] = {k: [name, col] for k, (name, col) in ref.items()}
    header = orjson.dumps(head)
    return b"".join(
        [
            _SPARSE_HEAD.pack(SPARSE_FORMAT, SPARSE_DELTA if delta else 0, len(header)),
            header,
            b"\0" * _pad(len(header)),
            zlib.compress(raw, level),
        ]
    )


def is_full_blob(payload: bytes | bytearray | memoryview) -> bool:
    """Whether a state blob stands alone (format 1, or format 2 without the delta flag)."""
    return bool(len(payload) >= 2 and (payload[0] == STATE_FORMAT or not payload[1] & SPARSE_DELTA))


def _select(
    name: str, arr: np.ndarray, shape: list[int], only: Mapping[str, int | None]
) -> tuple[np.ndarray, list[int]]:
    col = only[name]
    if col is None:
        return arr, shape
    if arr.ndim != 2 or not 0 <= col < arr.shape[1]:
        raise ValueError(f"array {name!r} has no column {col}")
    return arr[:, col], [shape[0]]


def _apply_sparse(
    buf: bytes, out: dict[str, StateValue] | None, only: Mapping[str, int | None] | None = None
) -> dict[str, StateValue]:
    fmt, flags, hlen = _SPARSE_HEAD.unpack_from(buf, 0)
    if fmt != SPARSE_FORMAT or flags & ~SPARSE_DELTA:
        raise ValueError(f"unknown sparse state format {fmt}/{flags}")
    delta = bool(flags & SPARSE_DELTA)
    if delta and out is None:
        raise ValueError("a chain must start with a full state")
    start = _SPARSE_HEAD.size
    if start + hlen > len(buf):
        raise ValueError("truncated state header")
    header = orjson.loads(buf[start : start + hlen])
    raw = zlib.decompress(buf[start + hlen + _pad(hlen) :])
    if len(raw) != header["raw"]:
        raise ValueError("sparse state body does not match its header")
    n = int(header["rows"])
    rows = np.cumsum(np.frombuffer(raw, dtype="<u4", count=n), dtype=np.int64)
    off = 4 * n
    state: dict[str, StateValue] = {} if out is None else out
    state.pop(REF_KEY, None)
    if "ref" in header:
        state[REF_KEY] = {k: (str(v[0]), v[1]) for k, v in header["ref"].items()}
    for name, (kind, value) in header["scalars"].items():
        state[name] = _unscalar(kind, value)
    for name, dtype_str, shape, axis in header["arrays"]:
        dtype = np.dtype(dtype_str)
        part_shape = list(shape)
        if axis >= 0:
            part_shape = [*part_shape[:axis], *part_shape[axis + 1 :], n]
        count = int(np.prod(part_shape, dtype=np.int64)) if part_shape else 1
        nbytes = count * dtype.itemsize
        if off + nbytes > len(raw):
            raise ValueError(f"array {name!r} does not fit the payload")
        part = np.frombuffer(raw, dtype=dtype, count=count, offset=off).reshape(part_shape)
        off += nbytes
        if axis >= 0:
            part = np.moveaxis(part, -1, axis)
        if only is not None:
            if name not in only:
                continue
            if only[name] is not None and axis > 0:
                raise ValueError(f"array {name!r}: columns are only selected on axis 0")
            part, shape = _select(name, part, list(shape), only)
        if axis < 0:
            state[name] = part.copy()
            continue
        cur = state.get(name) if delta else None
        if not isinstance(cur, np.ndarray) or list(cur.shape) != list(shape):
            if delta:
                raise ValueError(f"delta array {name!r} does not match the state before it")
            cur = np.zeros(shape, dtype=dtype)
            state[name] = cur
        if n and int(rows[-1]) >= shape[axis]:
            raise ValueError(f"array {name!r} has a row out of range")
        index: list[Any] = [slice(None)] * len(shape)
        index[axis] = rows
        cur[tuple(index)] = part
    if off != len(raw):
        raise ValueError(f"sparse state length {len(raw)} does not match its header")
    return state


def decode_chain(
    blobs: Sequence[bytes | bytearray | memoryview],
    *,
    only: Mapping[str, int | None] | None = None,
) -> dict[str, StateValue]:
    """Decode a chain: a full state blob (format 1 or 2) then format-2 deltas, in order.

    ``only`` keeps just the arrays it names (and the scalars), each whole (None) or as one
    column of a 2-d array (an int): what the serving weights refer to, without building the
    whole learner state. Raises :class:`DecodeError` on anything malformed (and on an empty
    chain)."""
    try:
        if not blobs:
            raise ValueError("empty chain")
        state: dict[str, StateValue] | None = None
        for i, blob in enumerate(blobs):
            buf = bytes(blob)
            if not buf:
                raise ValueError(f"blob {i} of the chain is missing")
            if buf[0] == STATE_FORMAT:
                if i:
                    raise ValueError("a format-1 state can only start a chain")
                state = decode_state(buf)
                if only is not None:
                    arrays = [k for k, v in state.items() if isinstance(v, np.ndarray)]
                    for k in arrays:
                        arr = state.pop(k)
                        if k in only:
                            state[k] = _select(k, arr, list(arr.shape), only)[0].copy()
            else:
                state = _apply_sparse(buf, state, only)
        assert state is not None
        return state
    except DecodeError:
        raise
    except Exception as e:
        raise DecodeError(f"cannot decode state chain: {e}") from e


GAPS_KEY = "\0gaps"  # in a quality blob: the array stored as the gaps of its sorted values


def encode_quality(state: Mapping[str, StateValue]) -> bytes:
    """A quality tracker's state as the state hash and each version store it: a full
    format-2 blob (no feature axis: every array whole, zlib level 6), its sorted
    ``buckets`` stored as gaps (small numbers: a third of the bytes once compressed), the
    scalar :data:`GAPS_KEY` saying so. Every retained version keeps one (the histogram
    reaches ~150 KB raw)."""
    out = dict(state)
    b = out.get("buckets")
    if (
        isinstance(b, np.ndarray)
        and b.ndim == 1
        and b.dtype.kind == "u"
        and (b.size < 2 or bool((b[1:] > b[:-1]).all()))
    ):
        out["buckets"] = np.diff(b, prepend=b.dtype.type(0))
        out[GAPS_KEY] = "buckets"
    return encode_sparse(out, {}, level=6)


def decode_quality(payload: bytes | bytearray | memoryview) -> dict[str, StateValue]:
    """Decode :func:`encode_quality`'s output (exactly, dtypes kept), or a format-1 blob
    (``encode_state``: how quality states were stored before); :class:`DecodeError`
    otherwise."""
    state = decode_chain([payload])
    name = state.pop(GAPS_KEY, None)
    if name is not None:
        gaps = state.get(name)
        if not isinstance(gaps, np.ndarray) or gaps.ndim != 1 or gaps.dtype.kind != "u":
            raise DecodeError(f"quality state: {name!r} is not an array of gaps")
        state[name] = np.cumsum(gaps, dtype=gaps.dtype)
    return state


QUALITY_KEYS = frozenset(
    {"window", "examples", "loss_sum", "buckets", "counts", "window_margins", "window_labels"}
)
_QDELTA = "\0qdelta"  # in a quality delta: how many window entries leave from the front


def encode_quality_delta(
    prev: Mapping[str, StateValue], state: Mapping[str, StateValue]
) -> bytes | None:
    """``state`` as a delta on ``prev`` (both quality tracker states): the margins and
    labels that entered the window (the oldest leave from the front), the histogram buckets
    whose count changed, the scalars — ~1 KB per commit instead of the whole state (1,000
    float64 margins and every bucket: 6–20 KB). A format-2 blob with the delta flag and no
    feature axis. None when ``state`` cannot be written so (another shape of state, dtypes
    that changed); the delta is checked by applying it, so what it decodes to is ``state``
    to the bit."""
    if set(prev) != QUALITY_KEYS or set(state) != QUALITY_KEYS:
        return None
    try:
        pm, sm = np.asarray(prev["window_margins"]), np.asarray(state["window_margins"])
        pl, sl = np.asarray(prev["window_labels"]), np.asarray(state["window_labels"])
        pb, sb = np.asarray(prev["buckets"]), np.asarray(state["buckets"])
        pc, sc = np.asarray(prev["counts"]), np.asarray(state["counts"])
        if (pm.dtype, pl.dtype, pb.dtype, pc.dtype) != (sm.dtype, sl.dtype, sb.dtype, sc.dtype):
            return None
        entered = int(state["examples"]) - int(prev["examples"])
        if entered < 0:
            return None
        kept = max(0, sm.shape[0] - entered)
        drop = pm.shape[0] - kept
        if drop < 0:
            return None
        keys = np.union1d(pb, sb)
        old = np.zeros(keys.shape[0], dtype=sc.dtype)
        new = np.zeros(keys.shape[0], dtype=sc.dtype)
        old[np.searchsorted(keys, pb)] = pc
        new[np.searchsorted(keys, sb)] = sc
        changed = keys[(old != new) & np.isin(keys, sb)]
        gone = np.setdiff1d(pb, sb).astype(sb.dtype)
        delta = {
            _QDELTA: drop,
            "window": state["window"],
            "examples": state["examples"],
            "loss_sum": state["loss_sum"],
            "margins": sm[kept:] if kept < sm.shape[0] else sm[:0],
            "labels": sl[kept:] if kept < sl.shape[0] else sl[:0],
            "keys": changed.astype(sb.dtype),
            "counts": new[np.searchsorted(keys, changed)],
            "gone": gone,
        }
        blob = encode_sparse(delta, {}, rows=np.zeros(0, dtype=np.int64), level=6)
        got = _apply_quality_delta(prev, blob)
    except (TypeError, ValueError, KeyError, DecodeError):
        return None
    for k in QUALITY_KEYS:
        a, b = got[k], state[k]
        if isinstance(b, np.ndarray):
            if not (isinstance(a, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape):
                return None
            if a.tobytes() != b.tobytes():
                return None
        elif type(a) is not type(b) or _scalar(k, a) != _scalar(k, b):
            return None
    return blob


def _apply_quality_delta(
    prev: Mapping[str, StateValue], blob: bytes | bytearray | memoryview
) -> dict[str, StateValue]:
    buf = bytes(blob)
    if len(buf) < 2 or buf[0] != SPARSE_FORMAT or not buf[1] & SPARSE_DELTA:
        raise ValueError("not a quality delta")
    d = _apply_sparse(buf, {})
    drop = int(d[_QDELTA])
    margins, labels = np.asarray(prev["window_margins"]), np.asarray(prev["window_labels"])
    if not 0 <= drop <= margins.shape[0] or labels.shape != margins.shape:
        raise ValueError("quality delta does not fit the state before it")
    pb, pc = np.asarray(prev["buckets"]), np.asarray(prev["counts"])
    keep = ~np.isin(pb, d["gone"]) & ~np.isin(pb, d["keys"])
    keys = np.concatenate([pb[keep], d["keys"]]).astype(d["keys"].dtype)
    counts = np.concatenate([pc[keep], d["counts"]]).astype(d["counts"].dtype)
    order = np.argsort(keys, kind="stable")
    return {
        "window": d["window"],
        "examples": d["examples"],
        "loss_sum": d["loss_sum"],
        "buckets": keys[order],
        "counts": counts[order],
        "window_margins": np.concatenate([margins[drop:], d["margins"]]),
        "window_labels": np.concatenate([labels[drop:], d["labels"]]),
    }


def decode_quality_chain(
    blobs: Sequence[bytes | bytearray | memoryview],
) -> dict[str, StateValue]:
    """A quality tracker state from its chain: a full blob (:func:`encode_quality`, or the
    older format 1) then deltas (:func:`encode_quality_delta`); :class:`DecodeError` on
    anything malformed."""
    if not blobs or any(b is None for b in blobs):
        raise DecodeError("cannot decode quality chain: a blob is missing")
    state = decode_quality(blobs[0])
    try:
        for blob in blobs[1:]:
            state = _apply_quality_delta(state, blob)
    except DecodeError:
        raise
    except Exception as e:
        raise DecodeError(f"cannot decode quality chain: {e}") from e
    return state


def needs_state(serving: Mapping[str, StateValue]) -> bool:
    """Whether decoded serving weights refer to their version's learner state."""
    return REF_KEY in serving


def serving_refs(serving: Mapping[str, StateValue]) -> dict[str, int | None]:
    """The state arrays (and columns) decoded serving weights refer to, for ``only=``."""
    refs: Any = serving.get(REF_KEY) or {}
    return {name: col for name, col in refs.values()}


def resolve_serving(
    serving: Mapping[str, StateValue],
    state: Mapping[str, StateValue] | None,
    *,
    selected: bool = False,
) -> dict[str, StateValue]:
    """Decoded serving weights with their references to ``state`` filled in (copies);
    ``selected``: ``state`` was decoded with ``only=serving_refs(serving)``."""
    out = dict(serving)
    refs = out.pop(REF_KEY, None)
    if refs:
        if state is None:
            raise DecodeError("the serving weights refer to a learner state that is missing")
        try:
            for key, (name, col) in refs.items():
                arr = np.asarray(state[name])
                if selected:
                    out[key] = arr
                    continue
                out[key] = np.array(arr if col is None else arr[:, col], dtype=arr.dtype)
        except (KeyError, IndexError, TypeError) as e:
            raise DecodeError(f"cannot resolve the serving weights: {e}") from e
    return out


def column_of(view: np.ndarray, state: Mapping[str, StateValue]) -> tuple[str, int | None] | None:
    """``(name, None)`` if ``view`` is a state array, ``(name, c)`` if it is column ``c`` of a
    2-d one (a view sharing its memory, as a learner's ``_served`` returns), else None."""
    for name, arr in state.items():
        if not isinstance(arr, np.ndarray) or arr.dtype != view.dtype:
            continue
        if view is arr:
            return name, None
        if (
            arr.ndim == 2
            and view.ndim == 1
            and view.shape[0] == arr.shape[0]
            and view.strides == (arr.strides[0],)
            and arr.flags.c_contiguous
            and np.shares_memory(view, arr)
        ):
            delta = view.__array_interface__["data"][0] - arr.__array_interface__["data"][0]
            col, rem = divmod(delta, arr.itemsize)
            if rem == 0 and 0 <= col < arr.shape[1]:
                return name, int(col)
    return None
