"""Appends (whole batches, idempotent ids, lag limit), reads after a cursor, trimming."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np
import pytest

from service.errors import Backpressure, InvalidExample, ModelNotFound, StoreUnavailable
from service.learning.features import Batch
from service.settings import Settings
from service.store import Store
from service.store.codec import decode_batch

SPEC = {"algorithm": "perceptron", "dim": 64, "params": {}}


def make_batch(n: int, seed: int = 0) -> Batch:
    rng = np.random.default_rng(seed)
    rows = [
        (sorted(rng.choice(64, 3, replace=False).tolist()), rng.standard_normal(3).tolist())
        for _ in range(n)
    ]
    return Batch.from_rows(rows, rng.integers(0, 2, n).tolist())


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[Store]:
    st = Store.open(settings)
    await st.create_model("m", SPEC)
    yield st
    await st.close()


async def entries(store: Store, m: str = "m") -> list:
    return (await store.read({m: "0-0"}, 10_000)).get(m, [])


async def test_one_entry_per_batch_and_exact_payload(store: Store) -> None:
    b1, b2 = make_batch(5, 1), make_batch(3, 2)
    r1 = await store.append("m", b1)
    r2, r3 = await store.append_many("m", [(b2, None), (b1, None)])
    assert (r1.accepted, r1.appended, r1.duplicates) == (5, 5, [])
    got = await entries(store)
    assert [e.id for e in got] == [r1.entry_id, r2.entry_id, r3.entry_id]
    assert [e.n for e in got] == [5, 3, 5]
    for e, want in zip(got, [b1, b2, b1], strict=True):
        batch, _ = decode_batch(e.payload)
        assert batch.data.tobytes() == want.data.tobytes()
        assert batch.indices.tobytes() == want.indices.tobytes()
        assert batch.y.tolist() == want.y.tolist()
    assert (await store.metrics("m")).appended == 13


async def test_empty_batch_appends_nothing(store: Store) -> None:
    r = await store.append("m", Batch.empty())
    assert (r.accepted, r.appended, r.entry_id) == (0, 0, None)
    assert await store.stream_length("m") == 0


async def test_unknown_model_appends_nothing(store: Store) -> None:
    with pytest.raises(ModelNotFound):
        await store.append("other", make_batch(2))
    assert await store.stream_length("other") == 0
    assert (await store.client.get(store.keys.appended("other"))) is None


async def test_ids_length_must_match(store: Store) -> None:
    with pytest.raises(InvalidExample) as info:
        await store.append("m", make_batch(3), ["a"])
    assert info.value.field == "id"
    assert await store.stream_length("m") == 0


async def test_repeated_ids_are_dropped_and_reported(store: Store) -> None:
    b = make_batch(4, 3)
    first = await store.append("m", b, ["a", "b", None, "c"])
    assert first.appended == 4 and first.duplicates == []
    again = await store.append("m", b, ["a", "x", None, "c"])
    assert (again.accepted, again.appended, again.duplicates) == (4, 2, [0, 3])
    got = await entries(store)
    assert len(got) == 2
    kept, _ = decode_batch(got[1].payload)
    want = Batch.concat([b.row(1), b.row(2)])
    assert kept.data.tobytes() == want.data.tobytes() and kept.y.tolist() == want.y.tolist()
    # all duplicates: accepted, nothing appended
    same = await store.append("m", b, ["a", "b", "x", "c"])
    assert (same.accepted, same.appended, same.entry_id, same.duplicates) == (
        4,
        0,
        None,
        [0, 1, 2, 3],
    )
    assert len(await entries(store)) == 2
    assert (await store.metrics("m")).appended == 6


async def test_many_batches_keep_their_order_around_duplicates(store: Store) -> None:
    b1, b2, b3 = make_batch(2, 1), make_batch(3, 2), make_batch(2, 3)
    await store.append("m", make_batch(1), ["seen"])
    r1, r2, r3 = await store.append_many(
        "m", [(b1, ["a", "b"]), (b2, ["c", "seen", None]), (b3, None)]
    )
    assert (r1.appended, r2.appended, r2.duplicates, r3.appended) == (2, 2, [1], 2)
    got = [decode_batch(e.payload)[0] for e in (await entries(store))[1:]]
    want = [b1, Batch.concat([b2.row(0), b2.row(2)]), b3]
    assert [g.y.tolist() for g in got] == [w.y.tolist() for w in want]
    assert [g.data.tobytes() for g in got] == [w.data.tobytes() for w in want]
    assert [r1.entry_id, r2.entry_id, r3.entry_id] == [e.id for e in (await entries(store))[1:]]


async def test_duplicate_ids_within_one_batch_keep_the_first(store: Store) -> None:
    r = await store.append("m", make_batch(3), ["a", "a", "b"])
    assert (r.appended, r.duplicates) == (2, [1])


async def test_ids_expire_after_the_window(settings: Settings) -> None:
    st = Store.open(settings.model_copy(update={"idempotency_window_s": 1}))
    try:
        await st.create_model("m", SPEC)
        await st.append("m", make_batch(1), ["a"])
        assert (await st.append("m", make_batch(1), ["a"])).appended == 0
        await asyncio.sleep(1.2)
        assert (await st.append("m", make_batch(1), ["a"])).appended == 1
    finally:
        await st.close()


async def test_concurrent_appends_of_the_same_ids_learn_once(store: Store) -> None:
    """Two clients retrying the same ids at once: each id lands exactly once."""
    ids = [f"id-{i}" for i in range(20)]
    b = make_batch(20, 4)
    results = await asyncio.gather(*[store.append("m", b, ids) for _ in range(5)])
    assert sum(r.appended for r in results) == 20
    assert all(r.accepted == 20 for r in results)
    assert sum(e.n or 0 for e in await entries(store)) == 20


async def test_lag_limit_refuses_whole_batches(settings: Settings) -> None:
    st = Store.open(settings.model_copy(update={"max_lag": 10}))
    try:
        await st.create_model("m", SPEC)
        await st.append("m", make_batch(8))
        with pytest.raises(Backpressure) as info:
            await st.append("m", make_batch(5))
        assert info.value.code == "lag_exceeded" and "8" in info.value.message
        assert await st.stream_length("m") == 1
        assert (await st.metrics("m")).lag == 8
        # a pipelined run stops at the first refused batch; the ones before it landed
        with pytest.raises(Backpressure):
            await st.append_many("m", [(make_batch(2), None), (make_batch(2), None)])
        assert (await st.metrics("m")).appended == 10
        # nothing after a refused batch lands, even a batch that would fit on its own
        with pytest.raises(Backpressure):
            await st.append_many("m", [(make_batch(5), None), (make_batch(0 + 1), None)])
        assert (await st.metrics("m")).appended == 10 and await st.stream_length("m") == 2
        # once applied (committed), the lag falls and appends pass again
        lease = await st.acquire("m", "w")
        assert lease is not None
        got = await entries(st)
        await st.commit(
            lease, expected_cursor="0-0", cursor=got[-1].id, state={}, counters={}, applied=10
        )
        assert (await st.metrics("m")).lag == 0
        assert (await st.append("m", make_batch(10))).appended == 10
    finally:
        await st.close()


async def test_a_batch_larger_than_max_lag_passes_when_nothing_waits(settings: Settings) -> None:
    st = Store.open(settings.model_copy(update={"max_lag": 3}))
    try:
        await st.create_model("m", SPEC)
        assert (await st.append("m", make_batch(5))).appended == 5
        with pytest.raises(Backpressure):
            await st.append("m", make_batch(1))
    finally:
        await st.close()


async def test_read_after_position_with_count_and_block(store: Store) -> None:
    ids = [(await store.append("m", make_batch(1, i))).entry_id for i in range(5)]
    got = await store.read({"m": ids[1]}, count=2)
    assert [e.id for e in got["m"]] == ids[2:4]
    assert await store.read({"m": ids[-1]}, count=10, block_ms=20) == {}
    assert await store.read({}, count=10, block_ms=5) == {}


async def test_blocking_read_wakes_on_append(store: Store) -> None:
    last = (await store.append("m", make_batch(1))).entry_id
    assert last is not None
    reader = asyncio.create_task(store.read({"m": last}, count=10, block_ms=5_000))
    await asyncio.sleep(0.05)
    new = (await store.append("m", make_batch(1, 9))).entry_id
    got = await asyncio.wait_for(reader, 5)
    assert [e.id for e in got["m"]] == [new]


async def test_read_spans_models(store: Store) -> None:
    await store.create_model("n", SPEC)
    a = (await store.append("m", make_batch(1))).entry_id
    b = (await store.append("n", make_batch(2))).entry_id
    got = await store.read({"m": "0-0", "n": "0-0"}, count=10)
    assert [e.id for e in got["m"]] == [a] and [e.id for e in got["n"]] == [b]


async def test_commit_trims_only_applied_entries(store: Store) -> None:
    ids = [(await store.append("m", make_batch(1, i))).entry_id for i in range(4)]
    lease = await store.acquire("m", "w")
    assert lease is not None
    await store.commit(
        lease, expected_cursor="0-0", cursor=ids[1], state={}, counters={}, applied=2
    )
    assert [e.id for e in await entries(store)] == ids[2:]
    assert await store.last_entry_id("m") == ids[-1]


async def test_unreachable_redis_is_store_unavailable() -> None:
    st = Store.open(Settings(redis_url="redis://127.0.0.1:1/0", key_prefix="x"))
    try:
        with pytest.raises(StoreUnavailable):
            await st.append("m", make_batch(1))
        with pytest.raises(StoreUnavailable):
            await st.metrics("m")
        assert await st.ping() is False
    finally:
        await st.close()


def test_unsupported_url_scheme() -> None:
    from service.store import connect

    with pytest.raises(StoreUnavailable) as info:
        connect(Settings(redis_url="http://127.0.0.1:6379"))
    assert info.value.field == "redis_url" and "http://" in info.value.message


async def test_memory_url_shares_one_server_per_url() -> None:
    s = Settings(redis_url="memory://streams-test", key_prefix="t")
    a, b = Store.open(s), Store.open(s)
    other = Store.open(s.model_copy(update={"redis_url": "memory://elsewhere"}))
    try:
        await a.create_model("m", SPEC)
        assert await b.list_models() == ["m"]
        assert await other.list_models() == []
    finally:
        for st in (a, b, other):
            await st.close()
