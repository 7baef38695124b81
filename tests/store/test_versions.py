"""Versions: publish in the commit, the head, events, retention (newest K + pinned), pin,
rollback (a new version equal to k; the learner reset; the holder fenced)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np
import orjson
import pytest

from service.errors import LeaseLost, VersionNotFound
from service.learning.features import Batch
from service.settings import Settings
from service.store import Lease, Store

SPEC = {"algorithm": "perceptron", "dim": 8, "params": {}}


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[Store]:
    st = Store.open(settings.model_copy(update={"keep_versions": 3}))
    await st.create_model("m", SPEC)
    yield st
    await st.close()


class Writer:
    """Appends one example and commits a recognisable state, publishing a version."""

    def __init__(self, store: Store, lease: Lease) -> None:
        self.store, self.lease, self.cursor, self.k = store, lease, "0-0", 0

    async def step(self, publish: bool = True) -> int | None:
        self.k += 1
        entry = (await self.store.append("m", Batch.from_rows([([1], [1.0])], [1]))).entry_id
        assert entry is not None
        result = await self.store.commit(
            self.lease,
            expected_cursor=self.cursor,
            cursor=entry,
            state={"w": np.full(2, float(self.k)), "t": self.k},
            counters={"examples_seen": self.k, "mistakes": self.k // 2, "updates": self.k},
            applied=1,
            serving={"W": np.full(2, float(self.k)), "b": 0.0, "link": "sigmoid"}
            if publish
            else None,
        )
        self.cursor = entry
        return result.version


@pytest.fixture
async def writer(store: Store) -> Writer:
    lease = await store.acquire("m", "w")
    assert lease is not None
    return Writer(store, lease)


async def test_publish_numbers_versions_and_moves_the_head(store: Store, writer: Writer) -> None:
    assert await store.head("m") is None
    with pytest.raises(VersionNotFound):
        await store.get_version("m")
    assert [await writer.step() for _ in range(2)] == [1, 2]
    assert await writer.step(publish=False) is None
    assert await store.head("m") == 2
    v = await store.get_version("m")
    assert v.info.number == 2 and v.info.head and v.info.source == "worker"
    assert (v.info.examples_seen, v.info.mistakes, v.info.updates) == (2, 1, 2)
    assert v.serving["W"].tolist() == [2.0, 2.0] and v.serving["link"] == "sigmoid"
    assert v.state is None
    full = await store.get_version("m", 1, with_state=True)
    assert full.state is not None and full.state["t"] == 1 and full.info.cursor < v.info.cursor
    assert [i.number for i in await store.list_versions("m")] == [1, 2]
    with pytest.raises(VersionNotFound):
        await store.get_version("m", 9)
    assert (await store.metrics("m")).version == 2


async def test_each_version_is_announced(store: Store, writer: Writer) -> None:
    pubsub = store.client.pubsub()
    await pubsub.subscribe(store.keys.events("m"))
    await pubsub.get_message(timeout=1)  # the subscribe confirmation
    await writer.step()
    await writer.step()
    got = []
    while len(got) < 2:
        msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=2)
        assert msg is not None, "no event"
        got.append(orjson.loads(msg["data"]))
    assert got == [{"version": 1, "head": 1}, {"version": 2, "head": 2}]
    await pubsub.aclose()


async def test_retention_keeps_newest_k_plus_pinned(store: Store, writer: Writer) -> None:
    for _ in range(3):
        await writer.step()
    await store.pin("m", 2)
    await store.unpin("m")  # releases the head and un-pins 2: retention may drop it
    await store.pin("m", 1)
    for _ in range(4):
        await writer.step()
    # keep 3 newest (5, 6, 7) + pinned 1 (also the held head)
    infos = await store.list_versions("m")
    assert [(i.number, i.pinned, i.head) for i in infos] == [
        (1, True, True),
        (5, False, False),
        (6, False, False),
        (7, False, False),
    ]
    for gone in (2, 3, 4):
        assert not await store.client.exists(store.keys.version("m", gone))
        with pytest.raises(VersionNotFound):
            await store.get_version("m", gone)
    # the head is held at the pin while new versions are published
    assert await store.head("m") == 1
    assert await store.unpin("m") is True
    assert await store.head("m") == 7
    await writer.step()
    assert [i.number for i in await store.list_versions("m")] == [6, 7, 8]
    assert await store.unpin("m") is False


async def test_pin_unknown_version(store: Store, writer: Writer) -> None:
    await writer.step()
    with pytest.raises(VersionNotFound):
        await store.pin("m", 5)


async def test_rollback_makes_a_new_version_and_resets_the_state(
    store: Store, writer: Writer
) -> None:
    for _ in range(3):
        await writer.step()
    before = await store.load_state("m")
    old = await store.get_version("m", 1, with_state=True)
    new = await store.rollback("m", 1)
    assert new == 4
    v = await store.get_version("m", with_state=True)
    assert v.info.number == 4 and v.info.source == "rollback:1"
    assert v.serving["W"].tobytes() == old.serving["W"].tobytes()
    assert v.state is not None and old.state is not None
    assert v.state["w"].tobytes() == old.state["w"].tobytes()
    after = await store.load_state("m")
    assert after.state is not None and after.state["t"] == 1
    assert (after.examples_seen, after.mistakes, after.updates) == (1, 0, 1)
    # the cursor stays: the discarded updates are not replayed; lag accounting unchanged
    assert after.cursor == before.cursor and after.applied == before.applied
    assert v.info.cursor == before.cursor
    assert (await store.history("m"))[-1]["event"] == "rollback:1"
    # the holder was fenced: its next commit is refused, and a new lease is a new epoch
    with pytest.raises(LeaseLost):
        await writer.step()
    lease = await store.acquire("m", "w2")
    assert lease is not None and lease.epoch > writer.lease.epoch + 1


async def test_rollback_unknown_version(store: Store, writer: Writer) -> None:
    await writer.step()
    with pytest.raises(VersionNotFound):
        await store.rollback("m", 7)
    assert await store.lease_holder("m") == writer.lease.token  # nothing fenced


async def test_rollback_releases_a_held_head(store: Store, writer: Writer) -> None:
    await writer.step()
    await writer.step()
    await store.pin("m", 1)
    assert await store.rollback("m", 2) == 3
    assert await store.head("m") == 3


async def test_versions_are_immutable_under_concurrent_reads(store: Store, writer: Writer) -> None:
    await writer.step()
    first = await store.get_version("m", 1)
    await asyncio.gather(*[writer.step() for _ in range(1)])
    again = await store.get_version("m", 1)
    assert again.serving["W"].tobytes() == first.serving["W"].tobytes()
    assert again.info == first.info.__class__(**{**first.info.as_dict(), "head": False})
