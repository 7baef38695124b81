"""Leases with fencing epochs: one holder, renew/release only by the holder, a stale epoch's
commit never lands."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np
import pytest

from service.errors import CommitConflict, LeaseLost
from service.settings import Settings
from service.store import Lease, Store

SPEC = {"algorithm": "perceptron", "dim": 8, "params": {}}


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[Store]:
    st = Store.open(settings)
    await st.create_model("m", SPEC)
    yield st
    await st.close()


async def commit(store: Store, lease: Lease, expected: str, cursor: str, w: float) -> None:
    await store.commit(
        lease,
        expected_cursor=expected,
        cursor=cursor,
        state={"w": np.full(3, w)},
        counters={"examples_seen": int(w)},
        applied=0,
    )


async def test_one_holder_and_increasing_epochs(store: Store) -> None:
    a = await store.acquire("m", "wa")
    assert a == Lease("m", "wa", 1) and a.token == "wa:1"
    assert await store.acquire("m", "wb") is None
    assert await store.lease_holder("m") == "wa:1"
    assert await store.release(Lease("m", "wb", 1)) is False
    assert await store.release(Lease("m", "wa", 99)) is False
    assert await store.release(a) is True
    b = await store.acquire("m", "wb")
    assert b is not None and b.epoch > a.epoch


async def test_no_lease_for_an_unknown_model(store: Store) -> None:
    assert await store.acquire("nope", "w") is None
    assert await store.lease_holder("nope") is None


async def test_renew_only_if_still_ours(store: Store) -> None:
    a = await store.acquire("m", "wa", ttl_ms=150)
    assert a is not None
    assert await store.renew([a], ttl_ms=150) == [True]
    await asyncio.sleep(0.3)  # expired, and nobody took it: still ours (a stall survived)
    assert await store.renew([a], ttl_ms=150) == [True]
    assert await store.lease_holder("m") == a.token
    await asyncio.sleep(0.3)  # expired again, and this time taken over
    b = await store.acquire("m", "wb")
    assert b is not None and b.epoch == 2
    assert await store.renew([a, b]) == [False, True]


async def test_renew_extends_the_ttl(store: Store) -> None:
    a = await store.acquire("m", "wa", ttl_ms=300)
    assert a is not None
    for _ in range(4):
        await asyncio.sleep(0.1)
        assert await store.renew([a], ttl_ms=300) == [True]
    assert await store.lease_holder("m") == a.token


async def test_a_stale_epoch_commit_is_refused(store: Store) -> None:
    """A paused worker whose lease expired and was taken over cannot overwrite the new owner's
    state, even with the right cursor."""
    old = await store.acquire("m", "w1", ttl_ms=100)
    assert old is not None
    await commit(store, old, "0-0", "1-0", 1.0)
    await asyncio.sleep(0.2)  # the "GC pause": the lease expires
    new = await store.acquire("m", "w2")
    assert new is not None and new.epoch == old.epoch + 1
    with pytest.raises(LeaseLost) as info:
        await commit(store, old, "1-0", "2-0", 666.0)
    assert info.value.code == "lease_lost"
    await commit(store, new, "1-0", "2-0", 2.0)
    state = await store.load_state("m")
    assert state.cursor == "2-0" and state.state is not None
    assert state.state["w"].tolist() == [2.0, 2.0, 2.0]


async def test_an_expired_lease_nobody_took_still_commits(store: Store) -> None:
    """After a stall past the TTL, the epoch is unchanged: nobody else can have written, so
    the commit lands and re-takes the lease."""
    lease = await store.acquire("m", "w", ttl_ms=100)
    assert lease is not None
    await asyncio.sleep(0.2)
    assert await store.lease_holder("m") is None
    await commit(store, lease, "0-0", "1-0", 1.0)
    assert await store.lease_holder("m") == lease.token
    assert (await store.load_state("m")).cursor == "1-0"


async def test_a_released_token_is_dead(store: Store) -> None:
    lease = await store.acquire("m", "w")
    assert lease is not None
    assert await store.release(lease)
    with pytest.raises(LeaseLost):
        await commit(store, lease, "0-0", "1-0", 1.0)
    assert await store.renew([lease]) == [False]
    assert await store.lease_holder("m") is None


async def test_same_worker_reacquiring_gets_a_new_token(store: Store) -> None:
    """The epoch, not the worker id, fences: a restarted worker with the same id cannot land
    a commit of its previous incarnation."""
    first = await store.acquire("m", "w", ttl_ms=100)
    assert first is not None
    await asyncio.sleep(0.2)
    second = await store.acquire("m", "w")
    assert second is not None and second.token != first.token
    with pytest.raises(LeaseLost):
        await commit(store, first, "0-0", "1-0", 1.0)


async def test_wrong_cursor_is_a_commit_conflict_and_writes_nothing(store: Store) -> None:
    lease = await store.acquire("m", "w")
    assert lease is not None
    await commit(store, lease, "0-0", "5-0", 1.0)
    with pytest.raises(CommitConflict) as info:
        await commit(store, lease, "4-0", "9-0", 9.0)
    assert "5-0" in info.value.message
    state = await store.load_state("m")
    assert state.cursor == "5-0" and state.examples_seen == 1


async def test_refused_commit_writes_nothing_at_all(store: Store) -> None:
    """No dead letter, version, history point or trim from a refused commit."""
    entry = await store.client.xadd(store.keys.examples("m"), {"b": b"x", "n": 1})
    lease = await store.acquire("m", "w")
    assert lease is not None
    await store.release(lease)
    from service.store import DeadLetter

    with pytest.raises(LeaseLost):
        await store.commit(
            lease,
            expected_cursor="0-0",
            cursor=entry.decode(),
            state={"w": np.ones(2)},
            counters={},
            applied=1,
            dead=[DeadLetter(entry.decode(), "bad", b"x")],
            history=True,
            serving={"W": np.ones(2)},
        )
    assert await store.stream_length("m") == 1
    assert await store.dead_letters("m") == []
    assert await store.list_versions("m") == []
    assert await store.history("m") == []
    assert (await store.load_state("m")).state is None
