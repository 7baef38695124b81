"""SIGKILL chaos: exactly-once learning whatever instant the worker dies at.

A worker *subprocess* (``python -m workers``, configured by the environment alone) learns two
models — PA-I and the averaged perceptron, whose state (weights, sums, timestamps) is richer —
from streams of 200,000 examples each, cut into entries of random size. It is SIGKILLed at
many random instants and restarted each time:

- right after a commit lands (the test watches the state key) plus a random sub-millisecond
  offset — so the next read, learn or commit is cut in the middle;
- a random few milliseconds after it took a lease — in the middle of learning;
- at a random instant after start — in imports, lease waits, idle reads.

Half of each stream is appended while the worker is being killed, the rest afterwards; a last
worker in burst mode drains it. Then the committed state must be bit-identical to one
uninterrupted in-process run over the same entries (weights and every counter), every
committed state sampled along the way must be the true prefix at its cursor, every retained
version must equal the reference state at its cursor, and no two leases ever had the same
fencing epoch.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis.asyncio as aioredis

from service.learning.features import Batch
from service.settings import Settings
from service.store import Store
from service.store.base import parse_id
from tests.store.pipeline_support import (
    CommitWatcher,
    WorkerProcess,
    assert_same_state,
    model_spec,
    random_sizes,
    reference_run,
    split,
    synthetic,
    worker_env,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

N = 200_000  # examples per model
DIM = 4096
NNZ = 20
KILLS = 24
MODELS = {
    "pa1": model_spec("pa1", DIM, C=0.5),
    "avg": model_spec("averaged_perceptron", DIM),
}


@pytest.fixture
def chaos_settings(settings: Settings) -> Settings:
    """Fast leases (a SIGKILLed holder's lease expires quickly) and tiny, frequent commits, so
    that commits and publishes are everywhere a kill can land."""
    return settings.model_copy(
        update={
            "lease_ttl_ms": 500,
            "heartbeat_ms": 100,
            "commit_ms": 5,
            "commit_examples": 300,
            "publish_ms": 30,
            "read_count": 2,
            "block_ms": 20,
        }
    )


@pytest.fixture
async def store(chaos_settings: Settings) -> AsyncIterator[Store]:
    st = Store.open(chaos_settings)
    yield st
    await st.close()


async def wait_until(
    predicate: Callable[[], Awaitable[bool]], timeout: float, poll: float = 0.0005
) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await predicate():
            return True
        await asyncio.sleep(poll)
    return False


async def wait_ready(worker: WorkerProcess, timeout: float = 20) -> None:
    """Until the worker has installed its signal handlers (see ``WorkerProcess.ready``)."""
    deadline = time.monotonic() + timeout
    while not worker.ready() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


async def test_sigkill_chaos_is_exactly_once(
    store: Store, chaos_settings: Settings, redis_url: str, tmp_path: Path
) -> None:
    rng = np.random.default_rng(20261122)
    # PA-I gets float64 values, the averaged perceptron float32-exact ones: both entry forms.
    batches = {
        m: split(
            synthetic(N, DIM, NNZ, seed=i, float32=m == "avg"),
            random_sizes(np.random.default_rng(i), N, 20, 600),
        )
        for i, m in enumerate(MODELS)
    }
    for m, spec in MODELS.items():
        assert await store.create_model(m, spec)

    appended: dict[str, list[tuple[str, Batch]]] = {m: [] for m in MODELS}

    async def append(m: str, part: list[Batch]) -> None:
        results = await store.append_many(m, [(b, None) for b in part])
        for b, r in zip(part, results, strict=True):
            assert r.appended == b.n and r.entry_id is not None
            appended[m].append((r.entry_id, b))

    # The first half of each stream goes in 2·KILLS pieces, while the worker is being killed.
    halves = {m: len(bs) // 2 for m, bs in batches.items()}
    pieces = {m: np.array_split(np.arange(halves[m]), 2 * KILLS) for m in MODELS}

    async def append_piece(j: int) -> None:
        for m in MODELS:
            idx = pieces[m][j]
            if idx.size:
                await append(m, batches[m][int(idx[0]) : int(idx[-1]) + 1])

    keys = store.keys
    client: Any = aioredis.Redis.from_url(redis_url)
    log = tmp_path / "worker.log"
    watcher = CommitWatcher(client, {m: keys.state(m) for m in MODELS})
    stop = asyncio.Event()
    watch = asyncio.create_task(watcher.run(stop))
    modes: list[str] = []
    try:

        async def cursors() -> tuple[Any, ...]:
            return tuple([await client.hget(keys.state(m), "cursor") for m in MODELS])

        for k in range(KILLS):
            worker = WorkerProcess(worker_env(chaos_settings, worker_id=f"chaos-{k}"), log)
            await append_piece(2 * k)
            before = await cursors()
            worker.start()
            await append_piece(2 * k + 1)
            mode = ("after-commit", "mid-learning", "anytime")[k % 3]
            if mode == "after-commit":

                async def committed() -> bool:
                    return await cursors() != before  # noqa: B023

                landed = await wait_until(committed, timeout=20)
                time.sleep(float(rng.uniform(0, 0.001)))  # sub-millisecond: no loop tick
                modes.append(mode if landed else "after-commit(timeout)")
            elif mode == "mid-learning":

                async def leased() -> bool:
                    for m in MODELS:
                        holder = await client.get(keys.lease(m))
                        if holder and holder.startswith(f"chaos-{k}:".encode()):  # noqa: B023
                            return True
                    return False

                await wait_until(leased, timeout=20)
                await asyncio.sleep(float(rng.uniform(0, 0.03)))
                modes.append(mode)
            else:
                await asyncio.sleep(float(rng.uniform(0.05, 1.5)))
                modes.append(mode)
            assert worker.alive, f"worker exited by itself: {worker.tail()}"
            worker.kill()
            assert worker.exit_codes == [-9]

        assert modes.count("after-commit") >= KILLS // 3 - 2, modes

        # The rest of each stream; then one worker in burst mode drains everything.
        for m in MODELS:
            await append(m, batches[m][halves[m] :])
        final = WorkerProcess(worker_env(chaos_settings, worker_id="final"), log, burst=True)
        final.start()
        try:
            code = await asyncio.to_thread(final.wait, 120)
        finally:
            final.kill()
        assert code == 0, final.tail()
        stop.set()
        await watch
        await watcher.sample()

        refs = {m: reference_run(MODELS[m], appended[m]) for m in MODELS}
        for m in MODELS:
            assert watcher.commits_seen(m) > KILLS, m
            bad = watcher.violations(m, refs[m].counters)
            assert not bad, bad[:5]

        for m in MODELS:
            ids = [eid for eid, _ in appended[m]]
            assert len(ids) == len(batches[m])
            committed_state = await store.load_state(m)
            assert committed_state.cursor == ids[-1]
            ref = refs[m]
            assert committed_state.state is not None
            assert_same_state(committed_state.state, ref.state, f"{m} committed state")
            # the quality tracker survives the kills like the counters: to the bit
            assert committed_state.quality is not None and ref.quality is not None
            assert_same_state(committed_state.quality, ref.quality, f"{m} quality")
            seen, mistakes, updates = ref.counters[ids[-1]]
            assert seen == N
            metrics = await store.metrics(m)
            assert (metrics.examples_seen, metrics.mistakes, metrics.updates) == (
                seen,
                mistakes,
                updates,
            )
            assert metrics.lag == 0 and metrics.appended == metrics.applied == N

            # The head version serves the reference's served weights; every retained version
            # is the reference state at its cursor, to the bit.
            head = await store.get_version(m)
            assert head.info.cursor == ids[-1]
            assert_same_state(head.serving, ref.serving, f"{m} head serving")
            versions = await store.list_versions(m)
            snaps = reference_run(
                MODELS[m], appended[m], snapshot_at={v.cursor for v in versions}
            ).snapshots
            for v in versions:
                full = await store.get_version(m, v.number, with_state=True)
                assert full.state is not None
                assert (v.examples_seen, v.mistakes, v.updates) == ref.counters[v.cursor]
                assert_same_state(full.state, snaps[v.cursor], f"{m} version {v.number}")

        # Fencing tokens: no epoch was ever granted twice for a model (a worker killed between
        # the grant and its log line leaves a gap, never a repeat), and epochs only grow.
        grants = re.findall(r"model (\w+): lease epoch (\d+),", log.read_text())
        for m in MODELS:
            epochs = [int(e) for mm, e in grants if mm == m]
            assert len(epochs) > KILLS // 2, f"{m}: only {len(epochs)} grants"
            assert epochs == sorted(set(epochs)), f"{m}: epochs {epochs}"
            assert int(await client.get(keys.epoch(m)) or 0) >= epochs[-1]
    finally:
        stop.set()
        if not watch.done():
            await watch
        await client.aclose()


RACE_N = 60_000  # examples per model
RACE_MODELS = {
    "r0": model_spec("pa1", DIM, C=0.5),
    "r1": model_spec("averaged_perceptron", DIM),
    "r2": model_spec("pa2", DIM, C=0.1),
}


@pytest.mark.parametrize("n_workers", [2, 3])
async def test_racing_workers_are_fenced(
    store: Store, chaos_settings: Settings, redis_url: str, tmp_path: Path, n_workers: int
) -> None:
    """Two or three workers race for the same three models while being SIGKILLed, paused
    past their lease (SIGSTOP … SIGCONT: a stale writer waking up), stopped with SIGTERM and
    restarted at random. Every sampled commit is a true prefix (a stale epoch's commit would
    rewind or double-apply), graceful stops exit 0, and the final states equal the single
    in-process run."""
    import signal

    rng = np.random.default_rng(1000 + n_workers)
    batches = {
        m: split(
            synthetic(RACE_N, DIM, NNZ, seed=10 + i),
            random_sizes(np.random.default_rng(10 + i), RACE_N, 20, 600),
        )
        for i, m in enumerate(RACE_MODELS)
    }
    for m, spec in RACE_MODELS.items():
        assert await store.create_model(m, spec)
    appended: dict[str, list[tuple[str, Batch]]] = {m: [] for m in RACE_MODELS}
    cut = {m: 0 for m in RACE_MODELS}
    events = 30

    async def append_some(fraction: float) -> None:
        """Append the next ``fraction`` of every model's entries."""
        for m, bs in batches.items():
            stop = min(len(bs), cut[m] + max(1, int(len(bs) * fraction)))
            part = bs[cut[m] : stop]
            if part:
                results = await store.append_many(m, [(b, None) for b in part])
                appended[m] += [(r.entry_id or "", b) for r, b in zip(results, part, strict=True)]
            cut[m] = stop

    keys = store.keys
    client: Any = aioredis.Redis.from_url(redis_url)
    log = tmp_path / "workers.log"
    watcher = CommitWatcher(client, {m: keys.state(m) for m in RACE_MODELS})
    stop_watch = asyncio.Event()
    watch = asyncio.create_task(watcher.run(stop_watch))
    generation = 0

    def spawn(slot: int) -> WorkerProcess:
        nonlocal generation
        generation += 1
        env = worker_env(chaos_settings, worker_id=f"race{slot}-{generation}")
        return WorkerProcess(env, log).start()

    slots: list[WorkerProcess | None] = [spawn(i) for i in range(n_workers)]
    actions: list[str] = []
    try:
        for _ in range(events):
            await append_some(0.6 / events)
            await asyncio.sleep(float(rng.uniform(0.05, 0.4)))
            i = int(rng.integers(n_workers))
            w = slots[i]
            if w is None or not w.alive:
                slots[i] = spawn(i)
                actions.append("start")
                continue
            action = ("kill", "kill", "pause", "term", "term-twice")[int(rng.integers(5))]
            actions.append(action)
            if action == "kill":
                w.kill()
                slots[i] = None
            elif action == "pause":
                # Past the lease TTL and the heartbeat age-out, with another worker alive: it
                # takes the models over, so when this one wakes up whatever it had in hand
                # is stale and must not land.
                for j, other in enumerate(slots):
                    if j != i and (other is None or not other.alive):
                        slots[j] = spawn(j)
                w.signal(signal.SIGSTOP)
                s = chaos_settings
                await asyncio.sleep(
                    (s.lease_ttl_ms + 6 * s.heartbeat_ms) / 1000 + float(rng.uniform(0.3, 0.6))
                )
                w.signal(signal.SIGCONT)
            elif action == "term":
                await wait_ready(w)
                w.signal(signal.SIGTERM)
                code = await asyncio.to_thread(w.wait, 30)
                assert code == 0, f"SIGTERM exit {code}: {w.tail()}"
                slots[i] = None
            else:
                # A second signal exits at once (128 + 15), unless the first already finished.
                await wait_ready(w)
                w.signal(signal.SIGTERM)
                time.sleep(float(rng.uniform(0, 0.002)))
                w.signal(signal.SIGTERM)
                code = await asyncio.to_thread(w.wait, 30)
                assert code in (0, 128 + signal.SIGTERM), f"exit {code}: {w.tail()}"
                slots[i] = None

        # A deterministic stale writer on top of the random ones: A holds leases, is frozen,
        # B takes every model over and commits, then A wakes up. A must be fenced (its
        # commit refused, or its renewal refused first). A and B log to their own files.
        for j, w in enumerate(slots):
            if w is not None:
                w.kill()
                slots[j] = None
        drill_logs = [tmp_path / "drill-a.log", tmp_path / "drill-b.log"]
        a = WorkerProcess(worker_env(chaos_settings, worker_id="drill-a"), drill_logs[0]).start()
        slots[0] = a
        await wait_ready(a)

        async def holders() -> list[str]:
            got = [await client.get(keys.lease(m)) for m in RACE_MODELS]
            return [(x or b"").decode().rsplit(":", 1)[0] for x in got]

        async def a_holds() -> bool:
            return "drill-a" in await holders()

        async def b_holds_all() -> bool:
            return set(await holders()) == {"drill-b"}

        async def a_fenced() -> bool:
            text = drill_logs[0].read_text()
            return "commit refused" in text or "lease lost" in text

        assert await wait_until(a_holds, timeout=30, poll=0.01), await holders()
        b = WorkerProcess(worker_env(chaos_settings, worker_id="drill-b"), drill_logs[1]).start()
        slots[1] = b
        await wait_ready(b)
        await append_some(0.1)
        a.signal(signal.SIGSTOP)
        assert await wait_until(b_holds_all, timeout=30, poll=0.01), await holders()
        await append_some(0.1)
        await asyncio.sleep(0.3)
        a.signal(signal.SIGCONT)
        assert await wait_until(a_fenced, timeout=30, poll=0.05), a.tail()

        await append_some(1.0)
        for w in slots:
            if w is not None and w.alive:
                await wait_ready(w)
                w.signal(signal.SIGTERM)
                assert await asyncio.to_thread(w.wait, 30) == 0, w.tail()
        final = WorkerProcess(worker_env(chaos_settings, worker_id="race-final"), log, burst=True)
        final.start()
        assert await asyncio.to_thread(final.wait, 120) == 0, final.tail()
        stop_watch.set()
        await watch
        await watcher.sample()

        assert "pause" in actions and "kill" in actions, actions
        for m in RACE_MODELS:
            assert len(appended[m]) == len(batches[m])
            ref = reference_run(RACE_MODELS[m], appended[m])
            bad = watcher.violations(m, ref.counters)
            assert not bad, bad[:5]
            committed = await store.load_state(m)
            assert committed.cursor == appended[m][-1][0]
            assert committed.state is not None
            assert_same_state(committed.state, ref.state, f"{m} after the race")
            metrics = await store.metrics(m)
            assert metrics.examples_seen == RACE_N and metrics.lag == 0
        text = log.read_text() + "".join(p.read_text() for p in drill_logs)
        grants = re.findall(r"model (\w+): lease epoch (\d+),", text)
        for m in RACE_MODELS:
            epochs = [int(e) for mm, e in grants if mm == m]
            assert len(epochs) == len(set(epochs)), f"{m}: an epoch was granted twice: {epochs}"
    finally:
        stop_watch.set()
        if not watch.done():
            await watch
        for w in slots:
            if w is not None:
                w.kill()
        await client.aclose()


async def test_rollback_fences_racing_workers(
    store: Store, chaos_settings: Settings, tmp_path: Path
) -> None:
    """Rollbacks land while two workers race (one of them paused now and then past its
    lease). A rollback keeps the cursor and fences the lease holder, so a commit in flight
    from before it must never land: that is the case where the epoch, not the cursor check,
    is what protects the state. The final state must equal the last rollback's state
    learned further with exactly the entries after its cursor."""
    import signal

    from service.learning.registry import make_learner

    rng = np.random.default_rng(77)
    spec = model_spec("averaged_perceptron", DIM)
    batches = split(
        synthetic(RACE_N, DIM, NNZ, seed=99),
        random_sizes(np.random.default_rng(99), RACE_N, 20, 600),
    )
    assert await store.create_model("rb", spec)
    appended: list[tuple[str, Batch]] = []
    log = tmp_path / "workers.log"
    workers = [
        WorkerProcess(worker_env(chaos_settings, worker_id=f"rb{i}"), log).start() for i in range(2)
    ]
    rollbacks: list[tuple[int, str, dict[str, Any]]] = []  # (new version, cursor, state)
    try:
        for w in workers:
            await wait_ready(w)
        pos = 0
        step = len(batches) // 12
        for round_ in range(10):
            part = batches[pos : pos + step]
            pos += step
            results = await store.append_many("rb", [(b, None) for b in part])
            appended += [(r.entry_id or "", b) for r, b in zip(results, part, strict=True)]
            await asyncio.sleep(float(rng.uniform(0.1, 0.4)))
            if round_ % 3 == 1:
                workers[round_ % 2].signal(signal.SIGSTOP)
                await asyncio.sleep(float(rng.uniform(0.0, 0.2)))
            for _ in range(200):  # the first version may take a moment
                if versions := await store.list_versions("rb"):
                    break
                await asyncio.sleep(0.05)
            if round_ >= 2:
                # Among the newer half: the oldest may be retired by retention meanwhile.
                half = len(versions) // 2
                target = versions[half + int(rng.integers(len(versions) - half))]
                new = await store.rollback("rb", target.number)
                back = await store.get_version("rb", new, with_state=True)
                assert back.state is not None and back.info.source == f"rollback:{target.number}"
                assert back.info.examples_seen == target.examples_seen
                rollbacks.append((new, back.info.cursor, back.state))
            if round_ % 3 == 1:
                await asyncio.sleep(chaos_settings.lease_ttl_ms / 1000 + 0.2)
                workers[round_ % 2].signal(signal.SIGCONT)
        rest = batches[pos:]
        results = await store.append_many("rb", [(b, None) for b in rest])
        appended += [(r.entry_id or "", b) for r, b in zip(results, rest, strict=True)]
        for w in workers:
            await wait_ready(w)
            w.signal(signal.SIGTERM)
            assert await asyncio.to_thread(w.wait, 30) == 0, w.tail()
        final = WorkerProcess(worker_env(chaos_settings, worker_id="rb-final"), log, burst=True)
        final.start()
        assert await asyncio.to_thread(final.wait, 120) == 0, final.tail()

        assert len(rollbacks) >= 3, rollbacks
        _, cursor, state = rollbacks[-1]
        learner = make_learner(spec["algorithm"], DIM, 2, spec["params"])
        learner.set_state(state)
        after = [b for eid, b in appended if parse_id(eid) > parse_id(cursor)]
        for b in after:
            learner.learn(b)
        committed = await store.load_state("rb")
        assert committed.cursor == appended[-1][0]
        assert committed.state is not None
        assert_same_state(committed.state, dict(learner.get_state()), "after the last rollback")
    finally:
        for w in workers:
            w.signal(signal.SIGCONT)
            w.kill()
