"""Sparse commits and versions: the locality the worker relies on, deltas that replay to the
bit, retention that keeps every retained version readable, and states/versions of format 1
(written before blobs existed) still loading and rolling back."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from service.learning.features import Batch
from service.learning.registry import REGISTRY, make_learner
from service.learning.spec import ModelSpec
from service.settings import Settings
from service.store import Store
from service.store.codec import decode_chain, encode_state, is_full_blob
from tests.workers.support import append_all, assert_same, batches, reference, spec
from workers.learners import SERVING_LOCAL, STATE_LOCAL, axes_of, serving_view, state_view
from workers.trainer import Worker

LOCAL = sorted((name, mc) for (name, mc) in REGISTRY if name in STATE_LOCAL)


def _changed_rows(before: dict[str, Any], after: dict[str, Any], axes: dict[str, int]) -> set[int]:
    rows: set[int] = set()
    for name, axis in axes.items():
        a, b = np.asarray(before[name]), np.asarray(after[name])
        diff = a.view(np.uint64) != b.view(np.uint64)
        if diff.ndim > 1:
            diff = diff.any(axis=1 - axis)
        rows |= set(np.flatnonzero(diff).tolist())
    return rows


@pytest.mark.parametrize(("name", "multiclass"), LOCAL)
def test_local_algorithms_change_only_the_rows_they_learn(name: str, multiclass: bool) -> None:
    """The contract behind delta commits: after learning a batch, no array row outside the
    batch's features differs (in the state; in the served weights for SERVING_LOCAL)."""
    dim, k = 97, 3 if multiclass else 2
    learner = make_learner(name, dim, k, {})
    axes, saxes = axes_of(learner)
    assert axes and saxes
    rng = np.random.default_rng(5)
    for _ in range(200):
        rows = [
            (
                sorted(rng.choice(dim, 5, replace=False).tolist()),
                (rng.standard_normal(5) * 9).tolist(),
            )
            for _ in range(4)
        ]
        batch = Batch.from_rows(rows, rng.integers(0, k, 4).tolist())
        before, sbefore = learner.get_state(), {**serving_view(learner)}
        sbefore["W"] = np.array(sbefore["W"])
        learner.learn(batch)
        touched = set(batch.indices.tolist())
        assert _changed_rows(before, state_view(learner), axes) <= touched
        if name in SERVING_LOCAL:
            assert _changed_rows(sbefore, serving_view(learner), saxes) <= touched


MULTICLASS = ModelSpec.from_dict(
    {"algorithm": "pa1", "bits": 14, "classes": ["a", "b", "c"], "params": {"C": 0.5}}
).to_dict()


@pytest.mark.parametrize("kind", ["adagrad", "multiclass"])
async def test_commits_write_deltas_and_every_version_replays_to_the_bit(
    settings: Settings, kind: str
) -> None:
    """Many small commits and publishes: the state chain holds deltas (each a small
    fraction of the full state), the committed state and every retained version equal an
    in-process run to the bit, unreferenced blobs are collected. AdaGrad serves a column of
    its state (the version names it: ``sref``); multi-class PA-I serves a scaled copy
    (serving deltas)."""
    s = settings.model_copy(
        update={
            "read_count": 2,
            "commit_examples": 300,
            "publish_examples": 600,
            "keep_versions": 4,
        }
    )
    store = Store.open(s)
    try:
        sp = spec("adagrad", bits=20) if kind == "adagrad" else MULTICLASS
        dim = 2 ** sp["bits"]
        stream = batches(8000, 11, dim=dim, lo=40, hi=160)
        if kind == "multiclass":
            stream = [
                Batch(b.indptr, b.indices, b.data, (b.indices[b.indptr[:-1]] % 3).astype(np.int32))
                for b in stream
            ]
        await store.create_model("m", sp)
        await append_all(store, "m", stream)
        worker = Worker(s, store, worker_id="w1")
        await worker.run(burst=True)
        ref = reference(sp, stream)
        committed = await store.load_state("m")
        assert committed.state is not None
        assert_same(committed.state, ref.get_state(), "state")
        assert len(committed.chain) > 1  # deltas on a full blob
        assert max(committed.chain[1:]) < committed.chain[0]
        # a delta costs what changed: at most 300 + 2 × 160 examples (the commit is checked
        # after each read of 2 entries) × 20 features × (3 floats + an index), not 25 MB
        assert max(committed.chain[1:]) < (300 + 2 * 160) * 20 * 32
        versions = await store.list_versions("m")
        assert len(versions) == 4
        # every retained version, read from its chains, is the reference at that point
        prefix = ModelSpec.from_dict(sp).build_learner()
        seen_at: dict[int, dict[str, Any]] = {}
        wanted = {v.examples_seen for v in versions}
        for b in stream:
            prefix.learn(b)
            if prefix.examples_seen in wanted:
                seen_at[prefix.examples_seen] = (prefix.get_state(), prefix.serving().W.copy())
        for v in versions:
            got = await store.get_version("m", v.number, with_state=True)
            state, W = seen_at[v.examples_seen]
            assert got.state is not None
            assert_same(got.state, state, f"version {v.number}")
            assert got.serving["W"].tobytes() == W.tobytes()
            sref = await store.client.hget(store.keys.version("m", v.number), "sref")
            assert (sref is not None) == (kind == "adagrad")
        if kind == "multiclass":  # serving deltas: some retained serving chain has several
            schains = [
                await store.client.hget(store.keys.version("m", v.number), "schain")
                for v in versions
            ]
            assert any(b"," in x for x in schains), schains
        # blobs: exactly those named by the state and the retained versions
        named = set()
        for key in [store.keys.state("m")] + [store.keys.version("m", v.number) for v in versions]:
            for field in ("chain", "schain", "qblob"):  # qblob: the quality tracker state
                named |= set((await store.client.hget(key, field) or b"").decode().split(","))
        blobs = {x.decode() for x in await store.client.hkeys(store.keys.blobs("m"))}
        assert blobs == named - {""}
    finally:
        await store.close()


async def test_rollback_to_a_delta_version_and_learning_on(settings: Settings) -> None:
    """Rollback names the target's chains (no copy); the worker reloads it, learns on with
    deltas, and pinned versions stay readable after their base went out of the chain."""
    s = settings.model_copy(
        update={
            "read_count": 2,
            "commit_examples": 200,
            "publish_examples": 200,
            "keep_versions": 3,
        }
    )
    store = Store.open(s)
    try:
        sp = spec("pa1", bits=16, C=0.5)
        first, second = batches(3000, 21, dim=2**16), batches(3000, 22, dim=2**16)
        await store.create_model("m", sp)
        await append_all(store, "m", first)
        await Worker(s, store, worker_id="w1").run(burst=True)
        versions = await store.list_versions("m")
        target = versions[0]
        pinned = await store.get_version("m", target.number, with_state=True)
        await store.pin("m", target.number)
        new = await store.rollback("m", target.number)
        back = await store.get_version("m", new, with_state=True)
        assert back.state is not None and pinned.state is not None
        assert_same(back.state, pinned.state, "rolled back")
        cursor = (await store.load_state("m")).cursor
        await append_all(store, "m", second)
        await Worker(s, store, worker_id="w2").run(burst=True)
        ref = reference(sp, second, state=pinned.state)
        committed = await store.load_state("m")
        assert committed.state is not None and committed.cursor != cursor
        assert_same(committed.state, ref.get_state(), "after rollback")
        # the pinned version outlived many compactions and retention rounds
        again = await store.get_version("m", target.number, with_state=True)
        assert again.state is not None
        assert_same(again.state, pinned.state, "pinned")
        head = await store.get_version("m")
        assert head.serving["W"].tobytes() == ref.serving().W.tobytes()
    finally:
        await store.close()


async def test_format1_state_and_versions_load_continue_and_roll_back(settings: Settings) -> None:
    """A model committed by the format-1 code (state ``blob``, versions with ``state`` and
    ``serving`` blobs) is taken over: learning continues from it (the first commit writes a
    full blob), its old version stays readable and can be rolled back to."""
    store = Store.open(settings)
    try:
        sp = spec("perceptron", bits=12)
        first, second = batches(1500, 31, dim=2**12), batches(1500, 32, dim=2**12)
        await store.create_model("m", sp)
        await append_all(store, "m", first)
        old = reference(sp, first)
        k, cursor = store.keys, await store.last_entry_id("m")
        assert cursor is not None
        # what the format-1 commit script left behind
        counters = {"examples_seen": old.examples_seen, "mistakes": old.mistakes}
        await store.client.hset(
            k.state("m"),
            mapping={"blob": encode_state(old.get_state()), "cursor": cursor, **counters,
                     "updates": old.updates, "applied": 1500, "updated_at": 1},
        )  # fmt: skip
        await store.client.hset(
            k.version("m", 1),
            mapping={"number": 1, "time": 1, "cursor": cursor, **counters,
                     "updates": old.updates, "source": "worker",
                     "state": encode_state(old.get_state()),
                     "serving": encode_state(old.serving().get_state())},
        )  # fmt: skip
        await store.client.zadd(k.versions("m"), {"1": 1})
        await store.client.set(k.version_seq("m"), 1)
        await store.client.set(k.head("m"), 1)
        await store.client.xtrim(k.examples("m"), minid=cursor)
        await store.client.xdel(k.examples("m"), cursor)
        await store.client.set(k.appended("m"), 1500)

        v1 = await store.get_version("m", 1, with_state=True)
        assert v1.state is not None
        assert_same(v1.state, old.get_state(), "format-1 version")
        await append_all(store, "m", second)
        await Worker(settings, store, worker_id="w").run(burst=True)
        ref = reference(sp, second, state=old.get_state())
        committed = await store.load_state("m")
        assert committed.state is not None and committed.chain
        assert_same(committed.state, ref.get_state(), "continued")
        assert not await store.client.hexists(k.state("m"), "blob")
        # back to the format-1 version: the state is its blob again, chains collected
        new = await store.rollback("m", 1)
        back = await store.load_state("m")
        assert back.state is not None and not back.chain
        assert_same(back.state, old.get_state(), "rolled back to format 1")
        assert (await store.get_version("m", new)).serving[
            "W"
        ].tobytes() == old.serving().W.tobytes()
        named = {v.number for v in await store.list_versions("m")}
        assert new in named and 1 in named
    finally:
        await store.close()


async def test_a_delta_with_no_chain_is_refused_and_writes_nothing(settings: Settings) -> None:
    from service.errors import CommitConflict
    from service.store import StateBlob
    from service.store.codec import encode_sparse

    store = Store.open(settings)
    try:
        await store.create_model("m", spec("perceptron"))
        entry = (await store.append("m", Batch.from_rows([([1], [1.0])], [1]))).entry_id
        lease = await store.acquire("m", "w")
        assert entry is not None and lease is not None
        delta = StateBlob(encode_sparse({"w": np.ones(4)}, {"w": 0}, rows=np.array([1])), False)
        assert not is_full_blob(delta.data)
        with pytest.raises(CommitConflict) as info:
            await store.commit(
                lease, expected_cursor="0-0", cursor=entry, state=delta, counters={}, applied=1
            )
        assert info.value.field == "chain"
        assert (await store.load_state("m")).cursor == "0-0"
        assert not await store.client.exists(store.keys.blobs("m"))
        full = StateBlob(encode_sparse({"w": np.ones(4)}, {"w": 0}), True)
        await store.commit(
            lease, expected_cursor="0-0", cursor=entry, state=full, counters={}, applied=1
        )
        got = await store.load_state("m")
        assert got.state is not None and got.state["w"].tolist() == [1.0] * 4
        assert decode_chain([full.data])["w"].tolist() == [1.0] * 4
    finally:
        await store.close()
