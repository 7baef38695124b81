"""Model specs (create, conflict, list, delete), commits' side effects, metrics, heartbeats."""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np
import pytest

from service.errors import InvalidSpec, ModelNotFound, SpecConflict
from service.learning.features import Batch
from service.learning.quality import QualityTracker
from service.settings import Settings
from service.store import DeadLetter, Quality, Store

SPEC = {"algorithm": "perceptron", "dim": 8, "params": {"a": 1, "b": [1, 2]}}


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[Store]:
    st = Store.open(settings)
    yield st
    await st.close()


def one() -> Batch:
    return Batch.from_rows([([1], [1.0])], [1])


async def test_create_get_and_conflict(store: Store) -> None:
    assert await store.create_model("m", SPEC) is True
    # the same spec (keys in another order) is not a change
    assert (
        await store.create_model(
            "m", {"params": {"b": [1, 2], "a": 1}, "dim": 8, "algorithm": "perceptron"}
        )
        is False
    )
    with pytest.raises(SpecConflict) as info:
        await store.create_model("m", {**SPEC, "dim": 16})
    assert info.value.code == "spec_conflict"
    assert await store.get_spec("m") == SPEC
    info2 = await store.model_info("m")
    assert info2["spec"] == SPEC and info2["created_at"] > 0
    assert await store.exists("m") and not await store.exists("x")


async def test_the_feedback_ttl_is_written_with_the_spec(store: Store) -> None:
    """The create script stores the model's own feedback TTL with the spec; creating the
    same spec again leaves it as it was; deleting the model deletes it."""
    assert await store.create_model("t", SPEC, feedback_ttl=0) is True
    assert await store.feedback_ttl("t") == 0
    assert await store.create_model("t", SPEC, feedback_ttl=60) is False
    assert await store.feedback_ttl("t") == 0
    assert await store.create_model("u", SPEC) is True
    assert await store.feedback_ttl("u") is None  # the service default applies
    await store.delete_model("t")
    assert await store.create_model("t", SPEC) is True
    assert await store.feedback_ttl("t") is None


async def test_unknown_and_invalid_names(store: Store) -> None:
    with pytest.raises(ModelNotFound):
        await store.get_spec("x")
    with pytest.raises(ModelNotFound):
        await store.metrics("x")
    with pytest.raises(InvalidSpec) as info:
        await store.create_model("bad:name", SPEC)
    assert info.value.field == "name"


async def test_list_models(store: Store) -> None:
    for m in ("b", "a", "c"):
        await store.create_model(m, SPEC)
    assert await store.list_models() == ["a", "b", "c"]


async def test_delete_removes_every_key_and_fences_the_worker(store: Store) -> None:
    await store.create_model("m", SPEC)
    await store.create_model("keep", SPEC)
    entry = (await store.append("m", one(), ["id1"])).entry_id
    assert entry is not None
    lease = await store.acquire("m", "w")
    assert lease is not None
    await store.commit(
        lease,
        expected_cursor="0-0",
        cursor=entry,
        state={"w": np.ones(2)},
        counters={},
        applied=1,
        history=True,
        serving={"W": np.ones(2)},
        dead=[DeadLetter("1-1", "x", b"")],
    )
    await store.pin("m", 1)
    await store.client.set(store.keys.prediction("m", "p1"), b"features", ex=60)
    assert await store.delete_model("m") is True
    assert await store.list_models() == ["keep"]
    left = [k async for k in store.client.scan_iter(match=f"{store.settings.key_prefix}:{{m}}:*")]
    assert left == [store.keys.epoch("m").encode()]  # kept on purpose: fencing survives
    with pytest.raises(Exception) as info:
        await store.commit(
            lease, expected_cursor=entry, cursor=entry, state={}, counters={}, applied=0
        )
    assert type(info.value).__name__ == "LeaseLost"
    assert await store.acquire("m", "w") is None  # no spec, no lease
    assert await store.delete_model("m") is False
    # re-created: a fresh model whose epochs continue (no token of the old life can match)
    await store.create_model("m", SPEC)
    again = await store.acquire("m", "w")
    assert again is not None and again.epoch > lease.epoch
    assert (await store.metrics("m")).appended == 0


async def test_commit_writes_counters_dead_letters_and_history(store: Store) -> None:
    await store.create_model("m", SPEC)
    e1 = (await store.append("m", one())).entry_id
    e2 = (await store.append("m", one())).entry_id
    assert e1 and e2
    lease = await store.acquire("m", "w")
    assert lease is not None
    result = await store.commit(
        lease,
        expected_cursor="0-0",
        cursor=e2,
        state={"w": np.arange(3.0), "t": 4},
        counters={"examples_seen": 1, "mistakes": 1, "updates": 1, "max_norm": 1.0},
        applied=2,
        dead=[DeadLetter(e1, "DecodeError: bad", b"\x09payload")],
        history=True,
    )
    assert result.version is None and result.time > 0
    state = await store.load_state("m")
    assert state.cursor == e2 and state.applied == 2 and state.mistakes == 1
    assert (
        state.state is not None
        and state.state["w"].tolist() == [0.0, 1.0, 2.0]
        and state.state["t"] == 4
    )
    dead = await store.dead_letters("m")
    assert [(d["entry"], d["reason"], d["bytes"]) for d in dead] == [(e1, "DecodeError: bad", 8)]
    payload = (await store.client.xrange(store.keys.dead("m")))[0][1][b"payload"]
    assert payload == b"\x09payload"
    assert [
        (p["examples_seen"], p["mistakes"], p["updates"]) for p in await store.history("m")
    ] == [(1, 1, 1)]
    m = await store.metrics("m")
    assert (m.examples_seen, m.mistakes, m.updates, m.lag, m.version) == (1, 1, 1, 0, None)
    assert m.last_update == result.time
    assert m.as_dict()["applied"] == 2


async def test_commit_carries_quality_into_state_version_and_history(store: Store) -> None:
    """The tracker's state and figures land in the same step as the learner state: in the
    state hash, the published version and the history point; dead letters still follow."""
    await store.create_model("m", SPEC)
    e1 = (await store.append("m", one())).entry_id
    e2 = (await store.append("m", one())).entry_id
    assert e1 and e2
    lease = await store.acquire("m", "w")
    assert lease is not None
    tracker = QualityTracker(window=4)
    tracker.update(np.array([0.5, -2.0, 1e-9]), np.array([1, 0, 0]))
    figures = tracker.summary()
    result = await store.commit(
        lease,
        expected_cursor="0-0",
        cursor=e2,
        state={"w": np.arange(3.0)},
        counters={"examples_seen": 3, "mistakes": 1, "updates": 1},
        applied=2,
        dead=[DeadLetter(e1, "DecodeError: bad", b"x")],
        history=True,
        serving={"W": np.arange(3.0), "b": 0.0, "link": "sigmoid"},
        quality=Quality(tracker.get_state(), figures),
    )
    assert result.version == 1
    state = await store.load_state("m")
    assert state.quality is not None
    again = QualityTracker.from_state(state.quality)
    assert again.summary() == figures and again.get_state()["counts"].tolist() == [1, 1, 1]
    assert (await store.metrics("m")).quality == figures
    point = (await store.history("m"))[-1]
    assert {k: point[k] for k in ("auc", "rolling_auc", "log_loss", "rolling_log_loss")} == {
        k: figures[k] for k in ("auc", "rolling_auc", "log_loss", "rolling_log_loss")
    }
    # the tracker state is written once (a blob the state and the version both name)
    version = await store.client.hmget(store.keys.version("m", 1), ["quality", "qblob"])
    named = await store.client.hget(store.keys.state("m"), "qblob")
    assert version[0] and version[1] == named
    assert await store.client.hget(store.keys.blobs("m"), named)
    assert await store.client.hget(store.keys.state("m"), "quality_state") is None
    assert [d["entry"] for d in await store.dead_letters("m")] == [e1]
    # a commit without quality (a multi-class model) leaves no quality anywhere
    await store.create_model("k", SPEC)
    lease_k = await store.acquire("k", "w")
    assert lease_k is not None
    await store.commit(lease_k, expected_cursor="0-0", cursor="0-0", state={"w": np.zeros(3)},
                       counters={}, applied=0, history=True)  # fmt: skip
    assert (await store.load_state("k")).quality is None
    assert (await store.metrics("k")).quality is None
    assert "auc" not in (await store.history("k"))[-1]


async def test_metrics_lag(store: Store) -> None:
    await store.create_model("m", SPEC)
    m0 = await store.metrics("m")
    assert (m0.examples_seen, m0.lag, m0.version, m0.last_update) == (0, 0, None, None)
    await store.append_many("m", [(one(), None), (Batch.concat([one(), one()]), None)])
    assert (await store.metrics("m")).lag == 3


async def test_heartbeats(store: Store) -> None:
    await store.heartbeat("w1", ["b", "a"], pid=12, host="h")
    await store.heartbeat("w2", [])
    workers = await store.workers()
    assert [(w.worker_id, w.models, w.pid, w.host) for w in workers] == [
        ("w1", ["a", "b"], 12, "h"),
        ("w2", [], None, None),
    ]
    await store.forget_worker("w1")
    assert [w.worker_id for w in await store.workers()] == ["w2"]
    # an old heartbeat is not alive
    await store.client.hset(store.keys.workers(), "w3", b'{"models": [], "ts": 1}')
    assert [w.worker_id for w in await store.workers()] == ["w2"]
    assert await store.client.hexists(store.keys.workers(), "w3") is False  # pruned


async def test_quality_blobs_follow_rollback_and_are_collected(store: Store) -> None:
    """Each commit writes the tracker state once (a blob); a rollback gives the state the
    version's blob back (exactly), and blobs nothing names any more are deleted."""
    await store.create_model("q", SPEC)
    lease = await store.acquire("q", "w")
    assert lease is not None
    tracker = QualityTracker()
    states = []
    cursor = "0-0"
    for i in range(3):
        tracker.update(np.array([0.5 * i, -1.0, 2.0]), np.array([1, 0, i % 2]))
        states.append(tracker.get_state())
        entry = (await store.append("q", one())).entry_id
        assert entry is not None
        await store.commit(
            lease, expected_cursor=cursor, cursor=entry, state={"w": np.full(3, float(i))},
            counters={"examples_seen": i + 1}, applied=1, serving={"W": np.zeros(3), "b": 0.0},
            quality=Quality(tracker.get_state(), tracker.summary()),
        )  # fmt: skip
        cursor = entry
    got = (await store.load_state("q")).quality
    assert (
        got is not None and got["window_margins"].tobytes() == states[2]["window_margins"].tobytes()
    )
    await store.rollback("q", 1)
    got = (await store.load_state("q")).quality
    assert got is not None
    for key, value in states[0].items():
        assert np.asarray(got[key]).tobytes() == np.asarray(value).tobytes(), key
    # every blob left is named by the state or a retained version
    named: set[bytes] = set()
    k = store.keys
    for key in [k.state("q"), *(k.version("q", v) for v in range(1, 5))]:
        for f in await store.client.hmget(key, ["chain", "schain", "qblob"]):
            named |= set(f.split(b",")) if f else set()
    assert set(await store.client.hkeys(k.blobs("q"))) == named


async def test_a_quality_delta_without_a_stored_chain_is_refused(store: Store) -> None:
    """A quality delta can only extend a stored quality chain; otherwise the commit is
    refused before anything is written."""
    from service.errors import CommitConflict
    from service.store.codec import encode_quality_delta

    await store.create_model("d", SPEC)
    lease = await store.acquire("d", "w")
    assert lease is not None
    t = QualityTracker()
    s1 = t.get_state()
    t.update(np.array([1.0]), np.array([1]), "calibrated-sigmoid")
    delta = encode_quality_delta(s1, t.get_state())
    assert delta is not None
    with pytest.raises(CommitConflict, match="quality"):
        await store.commit(
            lease, expected_cursor="0-0", cursor="0-0", state={"w": np.zeros(3)},
            counters={}, applied=0, quality=Quality(t.get_state(), t.summary(), delta),
        )  # fmt: skip
    assert await store.client.hget(store.keys.state("d"), "cursor") is None
    assert not await store.client.exists(store.keys.blobs("d"))
