"""The store against a real 3-master Redis Cluster started by the test.

Redis Cluster refuses any multi-key command, transaction or script whose keys span several
hash slots (CROSSSLOT). So the proof that every multi-key step of the store stays within one
model's slot is that the whole life of several models — create, append, learn, publish,
rollback, delete — works on a cluster, with the models spread over different masters.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.crc import key_slot

from service.learning.features import Batch
from tests.redis_servers import RedisCluster, redis_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster]:
    with redis_cluster(3) as c:
        yield c


def test_the_cluster_refuses_cross_slot_scripts(cluster: RedisCluster) -> None:
    """The harness is a real cluster: a script over two slots fails, over one tag it runs."""
    a, b = "sl:{alpha}:x", "sl:{beta}:x"
    assert key_slot(a.encode()) != key_slot(b.encode())
    node = cluster.node_for_slot(key_slot(a.encode()))
    client = redis.Redis(host="127.0.0.1", port=node.port)
    try:
        script = "redis.call('SET', KEYS[1], '1'); return redis.call('SET', KEYS[2], '1')"
        with pytest.raises(redis.ResponseError, match="same slot"):
            client.eval(script, 2, a, b)
        assert client.eval(script, 2, a, "sl:{alpha}:y") == b"OK"
    finally:
        client.close()


def test_the_model_keys_share_one_slot() -> None:
    """Every key of a model (including numbered versions) hashes to the model's slot."""
    from service.store.keys import Keys

    keys = Keys("sl")
    for m in ("spam", "ham.v2", "m-1", "x"):
        slots = {key_slot(k.encode()) for k in keys.model_keys(m)}
        slots |= {key_slot(keys.version(m, n).encode()) for n in (1, 7, 12345)}
        slots.add(key_slot(keys.epoch(m).encode()))
        assert slots == {key_slot(f"{{{m}}}".encode())}, m


def names_on_every_node(cluster: RedisCluster, per_node: int = 1) -> list[str]:
    """Model names whose hash tags land on each master in turn."""
    wanted: dict[int, list[str]] = {n.port: [] for n in cluster.nodes}
    i = 0
    while any(len(v) < per_node for v in wanted.values()):
        name = f"c{i}"
        node = cluster.node_for_slot(key_slot(f"{{{name}}}".encode()))
        if len(wanted[node.port]) < per_node:
            wanted[node.port].append(name)
        i += 1
    return [name for names in wanted.values() for name in names]


def keys_by_node(cluster: RedisCluster, prefix: str) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    for node in cluster.nodes:
        client = redis.Redis(host="127.0.0.1", port=node.port)
        try:
            out[node.port] = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        finally:
            client.close()
    return out


async def test_store_and_worker_on_a_cluster(cluster: RedisCluster, tmp_path: Path) -> None:
    """Create models on all three masters, append, learn (burst worker), publish, pin,
    roll back, learn again, delete: every step works, so every multi-key step of the store
    stayed in one slot; and each model's keys all live on its own master."""
    from service.settings import Settings
    from service.store import Store
    from tests.store.pipeline_support import (
        WorkerProcess,
        assert_same_state,
        model_spec,
        reference_run,
        split,
        synthetic,
        worker_env,
    )
    from workers.trainer import Worker

    prefix = f"cl{uuid.uuid4().hex[:8]}"
    settings = Settings(
        redis_url=cluster.url,
        redis_cluster=True,
        key_prefix=prefix,
        commit_ms=10,
        publish_ms=10,
        publish_examples=2_000,
        block_ms=10,
        lease_ttl_ms=2_000,
        heartbeat_ms=100,
        keep_versions=5,
        read_count=2,
    )
    names = names_on_every_node(cluster)
    assert len({cluster.node_for_slot(key_slot(f"{{{m}}}".encode())).port for m in names}) == 3
    dim = 1024
    specs = {
        m: model_spec(("pa1", "averaged_perceptron", "perceptron")[i], dim)
        for i, m in enumerate(names)
    }
    data = {m: split(synthetic(12_000, dim, 15, seed=i), [500] * 24) for i, m in enumerate(names)}
    store = Store.open(settings)
    try:
        for m, spec in specs.items():
            assert await store.create_model(m, spec) is True
            assert await store.create_model(m, spec) is False
        assert await store.list_models() == sorted(names)

        appended: dict[str, list[tuple[str, Batch]]] = {m: [] for m in names}

        async def append(m: str, batches: list[Batch]) -> None:
            results = await store.append_many(m, [(b, None) for b in batches])
            appended[m] += [(r.entry_id or "", b) for r, b in zip(results, batches, strict=True)]

        async def burst() -> None:
            await asyncio.wait_for(Worker(settings, store, worker_id="cw").run(burst=True), 60)

        for m in names:
            await append(m, data[m][:16])
        await burst()

        for m in names:
            ref = reference_run(specs[m], appended[m])
            committed = await store.load_state(m)
            assert committed.cursor == appended[m][-1][0]
            assert committed.state is not None
            assert_same_state(committed.state, ref.state, f"{m} on the cluster")
            versions = await store.list_versions(m)
            assert 1 < len(versions) <= 5  # several published, retention at keep_versions
            head = await store.get_version(m)
            assert head.info.examples_seen == 8_000
            assert_same_state(head.serving, ref.serving, f"{m} head")

        # Pin, roll back to an older version, then learn more: the result is what learning
        # the new entries from the rolled-back state gives.
        m = names[0]
        oldest = (await store.list_versions(m))[0]
        await store.pin(m, oldest.number)
        assert await store.head(m) == oldest.number
        assert await store.unpin(m) is True
        back = await store.rollback(m, oldest.number)
        assert await store.head(m) == back
        rolled = await store.get_version(m, back, with_state=True)
        assert rolled.info.examples_seen == oldest.examples_seen
        assert rolled.state is not None
        before = len(appended[m])
        await append(m, data[m][16:])
        # This time a worker subprocess, configured by the environment (cluster mode included).
        proc = WorkerProcess(worker_env(settings, worker_id="cw2"), tmp_path / "w.log", burst=True)
        proc.start()
        try:
            assert await asyncio.to_thread(proc.wait, 90) == 0, proc.tail()
        finally:
            proc.kill()
        from service.learning.registry import make_learner

        learner = make_learner(specs[m]["algorithm"], dim, 2, specs[m]["params"])
        learner.set_state(rolled.state)
        for _, b in appended[m][before:]:
            learner.learn(b)
        committed = await store.load_state(m)
        assert committed.state is not None
        assert_same_state(committed.state, dict(learner.get_state()), f"{m} after rollback")
        assert committed.examples_seen == oldest.examples_seen + 4_000

        # Every key of a model sits on the master that owns the model's slot.
        for port, found in keys_by_node(cluster, prefix).items():
            for key in found:
                tag = key.decode().split("{", 1)[1].split("}", 1)[0] if b"{" in key else None
                if tag is None:
                    continue  # the untagged global keys (models, workers)
                owner = cluster.node_for_slot(key_slot(f"{{{tag}}}".encode())).port
                assert owner == port, f"{key!r} on {port}, its slot is on {owner}"

        for m in names:
            assert await store.delete_model(m) is True
        assert await store.list_models() == []
        # Only the fencing epochs outlive a delete (by design: a re-created model's leases
        # must never reuse a token of the deleted one).
        left = [
            k
            for ks in keys_by_node(cluster, prefix).values()
            for k in ks
            if b"{" in k and not k.endswith(b":epoch")
        ]
        assert not left, left[:5]
    finally:
        for port, found in keys_by_node(cluster, prefix).items():
            if found:
                client = redis.Redis(host="127.0.0.1", port=port)
                for key in found:
                    client.delete(key)
                client.close()
        await store.close()


async def test_a_fresh_api_on_a_cluster_answers_a_first_burst(cluster: RedisCluster) -> None:
    """A just-started API process hit by 128 concurrent first requests: every answer is a 2xx
    or a 404 (redis-py's cluster client races when its first commands run concurrently; the
    lifespan initialises it before serving, ``Store.warm``)."""
    import asyncio

    from service.settings import Settings
    from service.store import Store
    from tests.api.conftest import running

    prefix = f"cw{uuid.uuid4().hex[:8]}"
    settings = Settings(redis_url=cluster.url, redis_cluster=True, key_prefix=prefix)
    names = [f"m{i}" for i in range(16)]
    setup = Store.open(settings)
    try:
        for m in names:
            await setup.create_model(m, {"algorithm": "pa1", "bits": 8})
    finally:
        await setup.close()
    async with running(settings) as (_, client):
        replies = await asyncio.gather(
            *(client.post(f"/models/{names[i % 16]}/predict", json={"text": "hello"})
              for i in range(128))
        )  # fmt: skip
        assert sorted({r.status_code for r in replies}) == [200]
        for m in names:
            assert (await client.delete(f"/models/{m}")).status_code in (200, 204)
