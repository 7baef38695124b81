"""Codecs: exact round trips, no per-example Python on decode, corrupt input → DecodeError."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.errors import DecodeError
from service.learning.features import Batch
from service.store.codec import (
    decode_batch,
    decode_chain,
    decode_quality,
    decode_quality_chain,
    decode_state,
    encode_batch,
    encode_batch_v1,
    encode_quality,
    encode_quality_delta,
    encode_sparse,
    encode_state,
    feature_axes,
    is_full_blob,
    needs_state,
    resolve_serving,
    serving_refs,
)


def same_batch(a: Batch, b: Batch) -> None:
    for name in ("indptr", "indices", "data", "y"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        assert x.tobytes() == y.tobytes(), name


def sample_batch() -> Batch:
    return Batch.from_rows([([0, 3], [1.5, -2.0]), ([], []), ([7], [1e-300])], [1, 0, 1])


@st.composite
def batches(draw: st.DrawFn) -> Batch:
    n = draw(st.integers(0, 12))
    width = draw(st.sampled_from([32, 64]))  # float32-exact values take the narrow form
    top = draw(st.sampled_from([2**8, 2**16 - 1, 2**20, 2**24 - 1, 2**31 - 1]))
    scaled = draw(st.booleans())  # one magnitude per row (L2-normalised binary text)
    rows = []
    for _ in range(n):
        idx = sorted(draw(st.sets(st.integers(0, top), max_size=8)))
        floats = st.floats(allow_nan=False, allow_infinity=False, width=width)
        if scaled:
            c = draw(floats)
            signs = draw(st.lists(st.booleans(), min_size=len(idx), max_size=len(idx)))
            vals = [-c if neg else c for neg in signs]
        else:
            vals = draw(st.lists(floats, min_size=len(idx), max_size=len(idx)))
        rows.append((idx, vals))
    y = draw(st.lists(st.integers(-1, 5), min_size=n, max_size=n))
    if n == 0:
        return Batch.empty()
    return Batch.from_rows(rows, y)


@settings(max_examples=150, deadline=None)
@given(batches(), st.booleans(), st.sampled_from([encode_batch, encode_batch_v1]))
def test_batch_round_trip(batch: Batch, with_ids: bool, encode: Any) -> None:
    """Both formats round-trip exactly (format 1 entries stay readable after an upgrade)."""
    ids = [f"id-{i}" if i % 2 else None for i in range(batch.n)] if with_ids else None
    got, got_ids = decode_batch(encode(batch, ids))
    same_batch(got, batch)
    assert got_ids == ids


def adversarial_batches() -> list[Batch]:
    nan_payload = np.array([0x7FF8_0000_DEAD_BEEF, 0xFFF0_0000_0000_0001], dtype="<u8").view("<f8")
    i32 = np.int32
    return [
        # -0.0, NaN payloads (quiet and signalling, with the sign set), subnormals, ±inf
        Batch(
            np.array([0, 6], dtype=np.int64),
            np.array([0, 1, 2, 3, 4, 2**31 - 1], dtype=i32),
            np.array([-0.0, nan_payload[0], nan_payload[1], 5e-324, -2.2e-308, -np.inf]),
            np.array([-1], dtype=i32),
        ),
        # unsorted and repeated indices, negative ones (the worker refuses them; the codec
        # must still carry them exactly), empty rows, extreme labels
        Batch(
            np.array([0, 3, 3, 5, 5], dtype=np.int64),
            np.array([9, 2, 2, -(2**31), 2**31 - 1], dtype=i32),
            np.array([1.0, 1.0, -1.0, 0.5, -0.5]),
            np.array([2**31 - 1, -(2**31), 0, -1], dtype=i32),
        ),
        # one magnitude per row with -0.0 and 0.0 mixed (not the same bits: kept wide)
        Batch(
            np.array([0, 2], dtype=np.int64),
            np.array([5, 6], dtype=i32),
            np.array([0.0, -0.0]),
            np.array([1], dtype=i32),
        ),
        # huge gaps (the first index of a row is stored whole: 5-byte varints)
        Batch(
            np.array([0, 2, 3], dtype=np.int64),
            np.array([0, 2**31 - 1, 2**31 - 2], dtype=i32),
            np.full(3, 1 / 3),
            np.array([0, 1], dtype=i32),
        ),
        Batch.empty(),
        Batch(np.zeros(4, dtype=np.int64), np.zeros(0, i32), np.zeros(0), np.zeros(3, i32)),
    ]


@pytest.mark.parametrize("batch", adversarial_batches())
@pytest.mark.parametrize("encode", [encode_batch, encode_batch_v1])
def test_batch_round_trip_is_bit_exact_on_adversarial_values(batch: Batch, encode: Any) -> None:
    got, _ = decode_batch(encode(batch))
    same_batch(got, batch)  # compares the bytes: NaN payloads and -0.0 included


def test_text_entries_are_smaller_in_format_2() -> None:
    """An SMS-sized L2-normalised binary text (~90 sorted hashed indices of 2**20) takes
    about 2.2 bytes a non-zero in format 2 (gap varints), against 3 in format 1."""
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(4):
        idx = np.sort(rng.choice(2**20, size=90, replace=False))
        rows.append((idx.tolist(), [1 / math.sqrt(90)] * 90))
    batch = Batch.from_rows(rows, [0, 1, 1, 0])
    v1, v2 = len(encode_batch_v1(batch)), len(encode_batch(batch))
    assert v2 < 0.8 * v1, (v1, v2)
    same_batch(decode_batch(encode_batch(batch))[0], batch)


def test_narrow_forms_only_when_exact() -> None:
    """Format 1: binary/count values and indices below 2**16 take 6 bytes a non-zero, not
    12; format 2: float32 values when exact."""
    rows = [([1, 7, 65535], [1.0, -0.0, 3.0]), ([2], [np.inf])]
    narrow = Batch.from_rows(rows, [1, 0])
    wide_values = Batch.from_rows([([1, 7, 65535], [0.1, 1.0, 1.0]), ([2], [1.0])], [1, 0])
    wide_index = Batch.from_rows([([1, 7, 65536], [1.0, 1.0, 1.0]), ([2], [1.0])], [1, 0])
    nan = Batch.from_rows([([1], [np.nan])], [0])
    size = {
        name: len(encode_batch_v1(b))
        for name, b in (("narrow", narrow), ("values", wide_values), ("index", wide_index))
    }
    assert size["values"] - size["narrow"] == 4 * 4 and size["index"] - size["narrow"] == 4 * 2
    assert len(encode_batch(wide_values)) - len(encode_batch(narrow)) == 4 * 4
    for b in (narrow, wide_values, wide_index, nan):
        got, _ = decode_batch(encode_batch(b))
        same_batch(got, b)
    signed = Batch(
        np.array([0, 2], dtype=np.int64),
        np.array([3, 4], dtype=np.int32),
        np.array([-0.0, -np.inf]),
        np.array([1], dtype=np.int32),
    )
    got, _ = decode_batch(encode_batch(signed))
    assert len(encode_batch(signed)) < len(encode_batch(wide_values))
    assert np.signbit(got.data[0]) and got.data[1] == -np.inf
    assert np.isnan(decode_batch(encode_batch(nan))[0].data[0])


@pytest.mark.parametrize("encode", [encode_batch, encode_batch_v1])
def test_unknown_flags_are_a_decode_error(encode: Any) -> None:
    raw = bytearray(encode(sample_batch()))
    raw[1] = 0x80
    with pytest.raises(DecodeError, match="flags"):
        decode_batch(bytes(raw))


def test_decoded_arrays_are_writable_and_aligned() -> None:
    got, _ = decode_batch(encode_batch(sample_batch()))
    for arr in (got.indptr, got.indices, got.data, got.y):
        assert arr.flags.writeable and arr.flags.aligned
    assert got.indptr.dtype == np.int64 and got.indices.dtype == np.int32
    assert got.data.dtype == np.float64 and got.y.dtype == np.int32


def test_memoryview_and_bytearray_input() -> None:
    raw = encode_batch(sample_batch())
    same_batch(decode_batch(memoryview(raw))[0], sample_batch())
    same_batch(decode_batch(bytearray(raw))[0], sample_batch())


def corruptions() -> list[bytes]:
    raw = encode_batch_v1(sample_batch(), ["a", "b", "c"])
    bad_indptr = bytearray(encode_batch_v1(sample_batch()))
    bad_indptr[32:40] = (5).to_bytes(8, "little")  # indptr[0] != 0
    decreasing = bytearray(encode_batch_v1(sample_batch()))
    decreasing[40:48] = (3).to_bytes(8, "little")  # indptr [0,3,2,3]: not monotone
    return [
        b"",
        b"\x01",
        b"\x07" + raw[1:],  # unknown format
        raw[:-1],  # truncated ids
        raw[:40],  # truncated arrays
        raw + b"\0",  # trailing bytes
        bytes(bad_indptr),
        bytes(decreasing),
        raw[:-5] + b"xxxxx",  # ids not JSON
        b"garbage that is long enough to pass the header check ..........",
        *corruptions_v2(),
    ]


def corruptions_v2() -> list[bytes]:
    raw = encode_batch(sample_batch(), ["a", "b", "c"])
    plain = encode_batch(sample_batch())
    return [
        b"\x02",
        b"\x02\x00",
        b"\x02\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",  # overlong header varint
        b"\x02\x00\x7f\x7f\x00",  # 127 rows in 5 bytes
        raw[:-1],  # truncated ids
        raw[:-5] + b"xxxxx",  # ids not JSON
        plain[:-1],  # a varint short
        plain + b"\x00",  # one varint too many
        plain[:-1] + b"\x80",  # the last varint unterminated
        plain[:-1] + b"\xff\xff\xff\xff\xff\x01",  # a varint of 6 bytes
    ]


@pytest.mark.parametrize("payload", corruptions())
def test_corrupt_batch_raises_decode_error(payload: bytes) -> None:
    with pytest.raises(DecodeError) as info:
        decode_batch(payload)
    assert info.value.__cause__ is not None or "format" in info.value.message


@pytest.mark.parametrize("encode", [encode_batch, encode_batch_v1])
def test_ids_count_must_match(encode: Any) -> None:
    raw = encode(sample_batch(), ["a", "b"])  # 3 rows, 2 ids
    with pytest.raises(DecodeError, match="ids"):
        decode_batch(raw)


def test_state_round_trip_is_exact() -> None:
    state = {
        "w": np.array([0.1, -0.0, np.inf, -np.inf, np.nan, 5e-324]),
        "W": np.arange(12, dtype=np.float64).reshape(3, 4) / 7,
        "ints": np.array([1, -2, 2**40], dtype=np.int64),
        "small": np.array([1, 2], dtype=np.int32),
        "flags": np.array([True, False]),
        "empty": np.zeros((0, 5)),
        "zero_d": np.array(3.25),
        "t": 12345678901234,
        "eta": 0.1,
        "neg_zero": -0.0,
        "big": float("inf"),
        "nan": float("nan"),
        "on": True,
        "link": "sigmoid",
        "none": None,
        "np_int": np.int64(7),
        "np_float": np.float64(1 / 3),
    }
    got = decode_state(encode_state(state))
    assert set(got) == set(state)
    for key, want in state.items():
        value = got[key]
        if isinstance(want, np.ndarray):
            assert value.dtype == want.dtype and value.shape == want.shape, key
            assert value.tobytes() == want.tobytes(), key
            assert value.flags.writeable
        elif isinstance(want, float) and math.isnan(want):
            assert math.isnan(value)
        else:
            assert value == want and type(value) is type(
                want.item() if hasattr(want, "item") else want
            ), key
    assert math.copysign(1, got["neg_zero"]) == -1


def test_big_endian_array_round_trips_by_value() -> None:
    arr = np.arange(4, dtype=">f8")
    got = decode_state(encode_state({"a": arr}))["a"]
    assert got.tolist() == arr.tolist()


def test_learner_state_round_trip() -> None:
    from service.learning.registry import make_learner

    learner = make_learner("averaged_perceptron", 16, 2, {})
    rng = np.random.default_rng(0)
    rows = [
        (sorted(rng.choice(16, 4, replace=False).tolist()), rng.standard_normal(4).tolist())
        for _ in range(50)
    ]
    learner.learn(Batch.from_rows(rows, rng.integers(0, 2, 50).tolist()))
    state = learner.get_state()
    other = make_learner("averaged_perceptron", 16, 2, {})
    other.set_state(decode_state(encode_state(state)))
    again = other.get_state()
    assert set(again) == set(state)
    for key, value in state.items():
        if isinstance(value, np.ndarray):
            assert again[key].tobytes() == value.tobytes()
        else:
            assert again[key] == value


@pytest.mark.parametrize("bad", [{"x": object()}, {"x": np.array([object()])}, {1: 2}])
def test_unencodable_state(bad: dict) -> None:
    with pytest.raises(TypeError):
        encode_state(bad)


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x09" + b"\0" * 15,
        encode_state({"w": np.ones(4)})[:-8],
        encode_state({"w": np.ones(4)}) + b"\0" * 8,
        encode_state({"w": np.ones(4)})[:20],
        b"\x01" + b"\0" * 7 + (10**6).to_bytes(8, "little"),
    ],
)
def test_corrupt_state_raises_decode_error(payload: bytes) -> None:
    with pytest.raises(DecodeError) as info:
        decode_state(payload)
    assert isinstance(info.value.__cause__, Exception)


# --- sparse states (format 2) and chains --------------------------------------------------

# Written by today's (format 1) encode_state, before format 2 existed: states and versions
# stored then must still load.
FORMAT1_STATE = bytes.fromhex(
    "010000000000000092000000000000007b227363616c617273223a7b226578616d706c65735f7365656e223a"
    "5b2269222c335d2c226d697374616b6573223a5b2269222c315d2c2275706461746573223a5b2269222c325d"
    "2c226d61785f6e6f726d223a5b2266222c223078312e30303030303030303030303030702b30225d7d2c2261"
    "7272617973223a5b5b2277222c223c6638222c5b335d2c302c32345d5d7d000000000000000000000000e03f"
    "00000000000000800000000000000040"
)


def test_format1_blob_still_decodes_alone_and_as_a_chain_base() -> None:
    for got in (decode_state(FORMAT1_STATE), decode_chain([FORMAT1_STATE])):
        assert got["w"].tolist() == [0.5, -0.0, 2.0] and got["examples_seen"] == 3
        assert math.copysign(1, got["w"][1]) == -1
    w = np.array([0.5, -0.0, 2.0])
    w[2] = 9.0
    delta = encode_sparse({"examples_seen": 4, "w": w}, {"w": 0}, rows=np.array([2]))
    chained = decode_chain([FORMAT1_STATE, delta])
    assert chained["w"].tolist() == [0.5, -0.0, 9.0] and chained["examples_seen"] == 4
    assert is_full_blob(FORMAT1_STATE) and not is_full_blob(delta)


def same_state(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for key, value in want.items():
        if isinstance(value, np.ndarray):
            assert got[key].dtype == value.dtype and got[key].shape == value.shape, key
            assert got[key].tobytes() == value.tobytes(), key
            assert got[key].flags.writeable
        else:
            assert got[key] == value or (value != value and got[key] != got[key]), key


def test_sparse_full_keeps_only_nonzero_rows_exactly() -> None:
    dim = 1 << 16
    wgs = np.zeros((dim, 3))
    wgs[[3, 70, 9000], 0] = [1.5, -0.0, np.nan]  # -0.0 and NaN are not zero
    wgs[65535, 2] = 1e-300
    state = {"wgs": wgs, "b": -0.0, "t": 7, "link": "sigmoid", "small": np.arange(3.0)}
    axes = feature_axes(state, dim, multiclass=False)
    assert axes == {"wgs": 0}
    blob = encode_sparse(state, axes)
    assert len(blob) < 1_000  # 4 rows, not 1.5 MB
    got = decode_chain([blob])
    same_state(got, state)
    assert math.copysign(1, got["b"]) == -1


def test_multiclass_feature_axis_and_deltas_replay_exactly() -> None:
    rng = np.random.default_rng(1)
    dim, k = 500, 3
    W, b = np.zeros((k, dim)), np.zeros(k)
    state = {"W": W, "b": b, "examples_seen": 0}
    axes = feature_axes(state, dim, multiclass=True)
    assert axes == {"W": 1}  # the per-class bias (K,) is stored whole
    chain = [encode_sparse(state, axes)]
    for step in range(1, 30):
        rows = rng.choice(dim, size=rng.integers(0, 12), replace=False)
        W[:, rows] += rng.standard_normal((k, rows.size))
        b += 1.0
        state["examples_seen"] = step
        chain.append(encode_sparse(state, axes, rows=np.concatenate([rows, rows])))
    same_state(decode_chain(chain), state)


@pytest.mark.parametrize(
    "chain",
    [
        [],
        [encode_sparse({"w": np.ones(4)}, {"w": 0}, rows=np.array([1]))],  # delta first
        [encode_sparse({"w": np.ones(4)}, {"w": 0})[:-3]],  # truncated body
        [encode_sparse({"w": np.ones(4)}, {"w": 0}), b""],  # a missing blob
        [encode_sparse({"w": np.ones(4)}, {"w": 0}), FORMAT1_STATE],  # format 1 mid-chain
        [
            encode_sparse({"w": np.ones(4)}, {"w": 0}),
            encode_sparse({"w": np.ones(5)}, {"w": 0}, rows=np.array([4])),  # other shape
        ],
    ],
)
def test_bad_chains_raise_decode_error(chain: list[bytes]) -> None:
    with pytest.raises(DecodeError):
        decode_chain(chain)


def test_normalised_text_rows_take_a_magnitude_per_row_and_three_byte_indices() -> None:
    """±1/√n per row over 2**20 buckets: ~3 bytes a non-zero and 8 a row, not 12 a
    non-zero; exact to the bit (signs of zero included)."""
    rng = np.random.default_rng(3)
    rows = []
    for k in range(200):
        idx = np.sort(rng.choice(2**20, 16, replace=False))
        c = 1 / np.sqrt(16 + k % 5) if k % 50 else 0.0
        rows.append((idx.tolist(), (c * rng.choice([-1.0, 1.0], 16)).tolist()))
    batch = Batch.from_rows(rows, [k % 2 for k in range(200)])
    payload = encode_batch_v1(batch)
    assert payload[1] == 4 | 8  # ROW_SCALE | INDICES_U24
    assert len(payload) < 200 * (16 * 3.2 + 8 + 8 + 4) + 64
    compact = encode_batch(batch)
    assert compact[1] == 4 | 16  # ROW_SCALE | INDICES_GAPS (16 of 2**20: ~2.6 bytes each)
    assert len(compact) < 200 * (16 * 2.8 + 8 + 2 + 2) + 16
    for raw in (payload, compact):
        got, _ = decode_batch(raw)
        same_batch(got, batch)
        assert got.data.flags.writeable and got.indices.flags.writeable


def test_serving_refs_decode_only_the_named_column() -> None:
    """A serving blob naming column 0 of ``wgs`` resolves to that column, exactly, whether
    the state chain is decoded whole or only that column (also over a format-1 base)."""
    rng = np.random.default_rng(4)
    dim = 1 << 12
    wgs = np.zeros((dim, 3))
    wgs[rng.choice(dim, 40, replace=False)] = rng.standard_normal((40, 3))
    state = {"wgs": wgs, "b": 0.5, "examples_seen": 3}
    for sparse in (True, False):
        base = encode_sparse(state, {"wgs": 0}) if sparse else encode_state(state)
        rows = rng.choice(dim, 7, replace=False)
        wgs[rows, 0] = -0.0
        delta = encode_sparse(state, {"wgs": 0}, rows=rows)
        ref = encode_sparse(
            {"W": wgs[:, 0], "b": 0.5, "link": "sigmoid"}, {}, ref={"W": ("wgs", 0)}
        )
        served = decode_chain([ref])
        assert needs_state(served) and serving_refs(served) == {"wgs": 0}
        whole = resolve_serving(served, decode_chain([base, delta]))
        part = decode_chain([base, delta], only=serving_refs(served))
        assert set(part) == {"b", "examples_seen", "wgs"} and part["wgs"].shape == (dim,)
        fast = resolve_serving(served, part, selected=True)
        for got in (whole, fast):
            assert got["W"].tobytes() == wgs[:, 0].tobytes()
            assert got["b"] == 0.5 and got["link"] == "sigmoid"
    with pytest.raises(DecodeError):
        resolve_serving(decode_chain([ref]), None)


def test_quality_state_is_compressed_and_old_quality_blobs_still_decode() -> None:
    """A quality tracker's state (stored in the state hash and in every version) round-trips
    exactly through its compressed blob, smaller than the raw format-1 blob; a format-1
    blob (how quality states were stored before) still decodes."""
    from service.learning.quality import QualityTracker

    rng = np.random.default_rng(3)
    tracker = QualityTracker()
    tracker.update(rng.standard_normal(20_000) * 4, rng.integers(0, 2, 20_000))
    state = tracker.get_state()
    blob, old = encode_quality(state), encode_state(state)
    assert len(blob) < len(old) / 3  # the sorted buckets stored as gaps, compressed
    for payload in (blob, old):
        got = decode_quality(payload)
        assert sorted(got) == sorted(state)
        for k, v in state.items():
            if isinstance(v, np.ndarray):
                assert got[k].dtype == v.dtype and got[k].tobytes() == v.tobytes(), k
            else:
                assert got[k] == v, k
        assert QualityTracker.from_state(got).summary() == tracker.summary()
    with pytest.raises(DecodeError):
        decode_quality(blob[:-4])
    empty = QualityTracker().get_state()
    assert decode_quality(encode_quality(empty))["buckets"].tolist() == []


def _same_quality(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert set(got) == set(want)
    for k, v in want.items():
        if isinstance(v, np.ndarray):
            assert got[k].dtype == v.dtype and got[k].tobytes() == v.tobytes(), k
        else:
            assert type(got[k]) is type(v) and (got[k] == v or math.isnan(v)), k


def test_quality_chains_replay_to_the_bit() -> None:
    """Each commit's quality tracker state as a delta on the one before (the margins that
    entered the window, the buckets whose count changed): a tenth of a full blob, and the
    chain decodes to the tracker state exactly — -0.0, subnormal and huge margins, a
    window that is not full yet, commits that learned nothing or more than a window."""
    from service.learning.quality import QualityTracker

    rng = np.random.default_rng(5)
    tracker = QualityTracker()
    prev = tracker.get_state()
    chain = [encode_quality(prev)]
    sizes = []
    for i in range(40):
        n = [0, 1, 90, 1500][i % 4]
        margins = rng.standard_normal(n) * 4
        if n:
            margins[0] = [-0.0, 5e-324, 1e300, -7.5][i % 4]
        tracker.update(margins, (rng.random(n) < 0.5).astype(np.int32), "calibrated-sigmoid")
        state = tracker.get_state()
        delta = encode_quality_delta(prev, state)
        assert delta is not None
        chain.append(delta)
        if n == 90:
            sizes.append((len(delta), len(encode_quality(state))))
        _same_quality(decode_quality_chain(chain), state)
        prev = state
    assert all(d < f / 4 for d, f in sizes[1:]), sizes  # once the window is full


def test_quality_deltas_refuse_what_they_cannot_write() -> None:
    from service.learning.quality import QualityTracker

    t = QualityTracker()
    t.update(np.array([0.5, -1.0]), np.array([1, 0]), "calibrated-sigmoid")
    s1 = t.get_state()
    t.update(np.array([2.0]), np.array([1]), "calibrated-sigmoid")
    s2 = t.get_state()
    assert encode_quality_delta(s2, s1) is None  # examples went back
    wider = {**s2, "counts": s2["counts"].astype(np.int64)}
    assert encode_quality_delta(s1, wider) is None  # a dtype changed: a full blob
    assert encode_quality_delta({**s1, "extra": 1}, s2) is None
    with pytest.raises(DecodeError):
        decode_quality_chain([encode_quality_delta(s1, s2) or b""])  # no full blob first
    with pytest.raises(DecodeError):
        decode_quality_chain([encode_quality(s1), encode_quality(s2)])  # not a delta
