"""Several workers racing for the same models: one writer per model at a time, no commit
from a stale epoch or a stale cursor lands, and the result is the single-worker result."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from service.errors import CommitConflict, LeaseLost
from service.learning.features import Batch
from service.settings import Settings
from service.store import Store
from tests.store.pipeline_support import worker_env
from tests.workers.support import append_all, assert_same, batches, reference, spec
from workers.trainer import Worker

REPO = Path(__file__).resolve().parents[2]

SPECS = {
    "m0": spec("pa1", C=0.5),
    "m1": spec("averaged_perceptron"),
    "m2": spec("perceptron"),
    "m3": spec("pa2", C=0.2),
    "m4": spec("pegasos", lam=0.01),
}


class Recorder:
    """Wraps a store's commit to record every accepted and refused commit."""

    def __init__(self) -> None:
        self.accepted: list[tuple[str, int, str, str]] = []  # model, epoch, from, to
        self.refused = 0

    def wrap(self, store: Store) -> Store:
        inner = store.commit

        async def commit(lease: Any, **kw: Any) -> Any:
            try:
                result = await inner(lease, **kw)
            except (LeaseLost, CommitConflict):
                self.refused += 1
                raise
            self.accepted.append((lease.model, lease.epoch, kw["expected_cursor"], kw["cursor"]))
            return result

        store.commit = commit  # type: ignore[method-assign]
        return store

    def check_chains(self) -> None:
        """Per model, the accepted commits form one chain from 0-0: no two commits started
        from the same cursor (that would be learning some entries twice), epochs never go
        back along the chain."""
        for m in {a[0] for a in self.accepted}:
            steps = [(e, f, t) for mm, e, f, t in self.accepted if mm == m and f != t]
            starts = [f for _, f, _ in steps]
            assert len(starts) == len(set(starts)), f"{m}: two commits from one cursor"
            by_start = {f: (e, t) for e, f, t in steps}
            cursor, epoch, seen = "0-0", 0, 0
            while cursor in by_start:
                e, cursor = by_start[cursor]
                assert e >= epoch, f"{m}: epoch went back from {epoch} to {e}"
                epoch, seen = e, seen + 1
            assert seen == len(steps), f"{m}: {len(steps) - seen} commits off the chain"


async def wait_caught_up(
    store: Store, models: Sequence[str], total: dict[str, int], timeout: float = 60
) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        ms = [await store.metrics(m) for m in models]
        if all(x.lag == 0 and x.applied == total[m] for x, m in zip(ms, models, strict=True)):
            return
        assert asyncio.get_running_loop().time() < deadline, [x.as_dict() for x in ms]
        await asyncio.sleep(0.05)


async def crash(worker: Worker, task: asyncio.Task[None]) -> None:
    """Kill a worker as SIGKILL would: it leaves its loop with no final commit and no
    release (its in-memory progress is lost, its leases stay until they expire)."""

    async def nothing() -> None:
        return None

    worker._shutdown = nothing  # type: ignore[method-assign]
    worker.stop()
    await asyncio.wait_for(task, 30)


async def test_three_workers_with_crashes_give_the_single_worker_result(settings: Settings) -> None:
    """Three in-process workers (each with its own connection) race for five models while
    the streams are being appended; workers are crashed and restarted at random."""
    s = settings.model_copy(
        update={"lease_ttl_ms": 600, "heartbeat_ms": 100, "commit_examples": 800, "read_count": 4}
    )
    rec = Recorder()
    admin = Store.open(s)
    streams = {m: batches(5000, 20 + i) for i, m in enumerate(SPECS)}
    total = {m: sum(b.n for b in streams[m]) for m in SPECS}
    for m, sp in SPECS.items():
        await admin.create_model(m, sp)
    stores: list[Store] = []
    workers: list[Worker] = []
    running: dict[int, tuple[Worker, asyncio.Task[None]]] = {}

    def start(i: int) -> None:
        st = rec.wrap(Store.open(s))
        stores.append(st)
        w = Worker(s, st, worker_id=f"w{i}-{len(stores)}")
        workers.append(w)
        running[i] = (w, asyncio.create_task(w.run()))

    try:
        for i in range(3):
            start(i)
        rng = random.Random(0)

        async def feed() -> None:
            chunks = {
                m: [streams[m][j : j + 3] for j in range(0, len(streams[m]), 3)] for m in SPECS
            }
            while any(chunks.values()):
                for m in SPECS:
                    if chunks[m]:
                        await admin.append_many(m, [(b, None) for b in chunks[m].pop(0)])
                # ~8 rounds: feeding lasts ~3 s, past the crashes below (workers hold only
                # models with work, so the crashes must land while there is some)
                await asyncio.sleep(0.4)

        feeder = asyncio.create_task(feed())
        for _ in range(4):
            await asyncio.sleep(rng.uniform(0.1, 0.4))
            # workers hold only models with work: once the feeder is done and the streams
            # drained, none may hold anything, so wait for a holder only while it feeds
            while not any(w.held for w, _ in running.values()) and not feeder.done():
                await asyncio.sleep(0.02)
            # crash the busiest worker: its models must change hands (a new epoch)
            i = max(running, key=lambda j: (len(running[j][0].held), rng.random()))
            await crash(*running[i])
            start(i)
        await feeder
        await wait_caught_up(admin, list(SPECS), total)
        for w, _task in running.values():
            w.stop()
        await asyncio.wait_for(asyncio.gather(*(t for _, t in running.values())), 30)
        for m, sp in SPECS.items():
            committed = await admin.load_state(m)
            assert committed.state is not None
            assert_same(committed.state, reference(sp, streams[m]).get_state(), m)
        rec.check_chains()
        assert len(rec.accepted) > 10
        # leases did change hands: more takeovers than models
        assert sum(w.stats["takeovers"] for w in workers) > len(SPECS)
    finally:
        for w, _task in running.values():
            w.stop()
        await asyncio.wait_for(
            asyncio.gather(*(t for _, t in running.values()), return_exceptions=True), 30
        )
        for st in [*stores, admin]:
            await st.close()


async def test_workers_share_the_models_fairly(settings: Settings) -> None:
    """Workers hold only models with work, and share them: alone, one takes every active
    model; a second one gets the models the first gives up over its share as soon as they
    have work; when one stops, the other takes its models over."""
    s = settings.model_copy(update={"heartbeat_ms": 100})
    admin = Store.open(s)
    models = ("a", "b", "c", "d")
    for m in models:
        await admin.create_model(m, spec("perceptron"))
    await admin.create_model("idle", spec("perceptron"))
    stores = [Store.open(s), Store.open(s)]
    workers = [Worker(s, st, worker_id=f"w{i}") for i, st in enumerate(stores)]

    fed = dict.fromkeys(models, 0)

    async def work(seed: int) -> None:
        for i, m in enumerate(models):
            stream = batches(100, seed + i)
            await append_all(admin, m, stream)
            fed[m] += sum(b.n for b in stream)

    async def until(probe: Any, tries: int = 200) -> None:
        for _ in range(tries):
            if probe():
                return
            await asyncio.sleep(0.05)

    tasks = [asyncio.create_task(workers[0].run())]
    try:
        await work(0)
        await until(lambda: len(workers[0].held) == 4)
        assert sorted(workers[0].held) == list(models)  # alone: every active model, not idle
        tasks.append(asyncio.create_task(workers[1].run()))
        await until(lambda: len(workers[0].held) == 2)
        for round_ in range(20):  # the models given up announce their work: the newcomer
            await work(10 + 10 * round_)  # takes them (a busy machine may need a few rounds)
            if [len(w.held) for w in workers] == [2, 2]:
                break
            await until(lambda: [len(w.held) for w in workers] == [2, 2], 40)
        assert [len(w.held) for w in workers] == [2, 2]
        assert set(workers[0].held).isdisjoint(workers[1].held)
        for _ in range(100):  # the heartbeat says so within one beat
            beats = {w.worker_id: w.models for w in await admin.workers()}
            if beats == {w.worker_id: sorted(w.held) for w in workers}:
                break
            await asyncio.sleep(0.05)
        assert beats == {w.worker_id: sorted(w.held) for w in workers}
        # one stops: the other picks up everything with work
        workers[0].stop()
        await asyncio.wait_for(tasks[0], 10)
        await work(500)
        await until(lambda: len(workers[1].held) == 4)
        assert sorted(workers[1].held) == list(models)
        await wait_caught_up(admin, list(models), fed)
    finally:
        for w in workers:
            w.stop()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10)
        for st in [*stores, admin]:
            await st.close()


async def test_two_worker_processes_in_burst(settings: Settings, tmp_path: Path) -> None:
    """Two ``python -m workers --burst`` processes over three models: both exit 0 once every
    model is caught up, and each model equals its single-worker result."""
    admin = Store.open(settings)
    models = ["m0", "m1", "m2"]
    streams: dict[str, list[Batch]] = {m: batches(20_000, 40 + i) for i, m in enumerate(models)}
    try:
        for m in models:
            await admin.create_model(m, SPECS[m])
            await append_all(admin, m, streams[m])
        procs = []
        for i in range(2):
            log = (tmp_path / f"w{i}.log").open("wb")
            procs.append(
                (
                    subprocess.Popen(
                        [sys.executable, "-m", "workers", "--burst", "--worker-id", f"p{i}"],
                        cwd=REPO,
                        env=worker_env(settings),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    ),
                    log,
                )
            )
        try:
            codes = [await asyncio.to_thread(p.wait, 120) for p, _ in procs]
        finally:
            for p, log in procs:
                if p.poll() is None:
                    p.kill()
                log.close()
        logs = "\n".join((tmp_path / f"w{i}.log").read_text() for i in range(2))
        assert codes == [0, 0], logs
        for m in models:
            committed = await admin.load_state(m)
            assert committed.state is not None, logs
            assert_same(committed.state, reference(SPECS[m], streams[m]).get_state(), m)
    finally:
        await admin.close()


__all__ = ["pytest"]
