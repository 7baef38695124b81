"""The worker against the real Redis: burst = in-process learning to the bit, dead letters,
takeover after a crash, rollback, SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from service.learning.features import Batch
from service.settings import Settings
from service.store import Store
from service.store.codec import encode_batch
from tests.workers.support import (
    append_all,
    assert_same,
    batches,
    reference,
    reference_quality,
    spec,
)
from workers.start import signal_handler
from workers.trainer import Worker

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[Store]:
    st = Store.open(settings)
    yield st
    await st.close()


async def test_burst_equals_in_process_learning(settings: Settings) -> None:
    """Three models, small reads and frequent commits: the committed state, counters and the
    published version equal one in-process run over the same batches, to the bit."""
    s = settings.model_copy(
        update={"read_count": 3, "commit_examples": 700, "publish_examples": 1500}
    )
    store = Store.open(s)
    try:
        # c: the ensemble (not row-local: full blobs; members' arrays prefixed "m0."…)
        specs = {"a": spec("pa1", C=0.5), "b": spec("averaged_perceptron"), "c": spec("ensemble")}
        streams = {"a": batches(6000, 1), "b": batches(5000, 2), "c": batches(3000, 3)}
        for m in specs:
            await store.create_model(m, specs[m])
            await append_all(store, m, streams[m])
        worker = Worker(s, store, worker_id="w1")
        await worker.run(burst=True)
        assert worker.stats["commits"] > 4 and worker.stats["publishes"] > 2
        for m in specs:
            ref = reference(specs[m], streams[m])
            committed = await store.load_state(m)
            assert committed.state is not None
            assert_same(committed.state, ref.get_state(), m)
            metrics = await store.metrics(m)
            assert (metrics.examples_seen, metrics.mistakes, metrics.updates) == (
                ref.examples_seen,
                ref.mistakes,
                ref.updates,
            )
            assert metrics.lag == 0 and await store.stream_length(m) == 0
            head = await store.get_version(m)
            assert head.serving["W"].tobytes() == ref.serving().W.tobytes()
            assert head.info.examples_seen == ref.examples_seen
            assert await store.history(m)
        assert await store.lease_holder("a") is None  # released on exit
        assert await store.workers() == []
    finally:
        await store.close()


async def test_poison_entries_are_dead_lettered_and_later_ones_learned(store: Store) -> None:
    sp = spec("perceptron", bits=10)
    await store.create_model("m", sp)
    good = batches(1500, 3, dim=2**10)
    k = store.keys
    await append_all(store, "m", good[:2])
    # an undecodable entry, then a decodable one the model cannot learn (index >= dim),
    # then a bad label — each as a writer that bypassed validation would leave it
    out_of_range = Batch.from_rows([([5, 5000], [1.0, 1.0])], [1])
    bad_label = Batch.from_rows([([5], [1.0])], [7])
    for payload, n in (
        (b"\x07" + b"g" * 200_000, 2),
        (encode_batch(out_of_range), 1),
        (encode_batch(bad_label), 1),
    ):
        await store.client.xadd(k.examples("m"), {"b": payload, "n": n})
        await store.client.incrby(k.appended("m"), n)
    await append_all(store, "m", good[2:])
    worker = Worker(store.settings, store)
    await worker.run(burst=True)
    committed = await store.load_state("m")
    assert committed.state is not None
    assert_same(committed.state, reference(sp, good).get_state(), "after poison")
    dead = await store.dead_letters("m")
    assert len(dead) == 3 and worker.stats["dead"] == 3
    reasons = " | ".join(d["reason"] for d in reversed(dead))
    assert "DecodeError" in reasons and "[0, 1024), got 5000" in reasons and "y[0] = 7" in reasons
    assert dead[-1]["bytes"] == 64 * 1024 and "200001 bytes" in dead[-1]["reason"]  # the head only
    assert (await store.metrics("m")).lag == 0


async def test_takeover_after_a_crash_learns_each_entry_once(settings: Settings) -> None:
    """Worker A learns part of the stream and dies without releasing (its in-memory progress
    beyond its last commit is lost); B takes over when the lease expires, replays from the
    cursor, and the result equals an uninterrupted run. A's late commit is refused."""
    s = settings.model_copy(
        update={"lease_ttl_ms": 400, "commit_ms": 10_000, "commit_examples": 1_000}
    )
    store = Store.open(s)
    try:
        sp = spec("pa2", C=0.1)
        stream = batches(8000, 4)
        await store.create_model("m", sp)
        await append_all(store, "m", stream)
        a = Worker(s, store, worker_id="a")
        await a._maintain()
        held = a.held["m"]
        got = await store.read({"m": held.position}, 12)
        a._apply(held, got["m"][:6])
        await a._flush()  # over commit_examples: commits 6 entries
        a._apply(held, got["m"][6:])  # learned, never committed: the crash loses it
        assert held.committed != held.position
        committed_by_a = held.committed
        b = Worker(s, store, worker_id="b")
        await b.run(burst=True)  # waits for A's lease to expire, then takes over
        assert b.stats["takeovers"] == 1
        committed = await store.load_state("m")
        assert committed.state is not None
        assert_same(committed.state, reference(sp, stream).get_state(), "after takeover")
        # the quality tracker was committed with the state and reloaded: same to the bit
        quality = reference_quality(stream, sp)
        assert committed.quality is not None
        assert_same(committed.quality, quality.get_state(), "quality after takeover")
        assert (await store.metrics("m")).quality == quality.summary()
        assert committed.cursor > committed_by_a
        # A wakes up and tries to commit what it has: refused, and it drops the model
        await a._flush(force=True)
        assert "m" not in a.held and a.stats["refused"] == 1
        assert_same((await store.load_state("m")).state or {}, committed.state, "unchanged")
    finally:
        await store.close()


async def test_rollback_then_more_learning(store: Store) -> None:
    """Learning after a rollback to k equals learning the new entries from k's state."""
    sp = spec("mira")
    stream = batches(6000, 5)
    first, discarded, after = stream[:8], stream[8:14], stream[14:]
    await store.create_model("m", sp)
    await append_all(store, "m", first)
    await Worker(store.settings, store).run(burst=True)
    k = await store.head("m")
    assert k is not None
    await append_all(store, "m", discarded)
    await Worker(store.settings, store).run(burst=True)
    new = await store.rollback("m", k)
    assert await store.head("m") == new
    await append_all(store, "m", after)
    await Worker(store.settings, store).run(burst=True)
    want = reference(sp, list(first) + list(after))
    committed = await store.load_state("m")
    assert committed.state is not None
    assert_same(committed.state, want.get_state(), "rollback")
    assert (await store.metrics("m")).examples_seen == sum(b.n for b in first + after)
    # the quality tracker went back with the learner: it never saw the discarded entries
    quality = reference_quality(list(first) + list(after), sp)
    assert committed.quality is not None
    assert_same(committed.quality, quality.get_state(), "quality after rollback")
    points = await store.history("m")
    rolled = next(p for p in points if p.get("event") == f"rollback:{k}")
    assert rolled["auc"] == reference_quality(first, sp).summary()["auc"]
    assert points[-1]["log_loss"] == quality.log_loss


async def test_rollback_fences_a_running_worker(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker holding the model while it is rolled back drops its state and reloads; it
    says so at info level, as the routine it is, not as a lost lease."""
    caplog.set_level(logging.INFO, logger="streamlearn.worker")
    store = Store.open(settings)
    try:
        sp = spec("perceptron")
        stream = batches(3000, 6)
        await store.create_model("m", sp)
        await append_all(store, "m", stream[:5])
        worker = Worker(settings, store, worker_id="w")
        task = asyncio.create_task(worker.run())
        for _ in range(200):
            if (await store.metrics("m")).lag == 0 and await store.head("m"):
                break
            await asyncio.sleep(0.05)
        k = await store.head("m")
        assert k is not None
        await store.rollback("m", k)  # same weights, but the holder is fenced
        await append_all(store, "m", stream[5:])
        for _ in range(200):
            if (await store.metrics("m")).lag == 0:
                break
            await asyncio.sleep(0.05)
        worker.stop()
        await asyncio.wait_for(task, 30)
        assert worker.stats["takeovers"] >= 2
        committed = await store.load_state("m")
        assert committed.state is not None
        assert_same(committed.state, reference(sp, stream).get_state(), "fenced")
        said = [(r.levelno, r.getMessage()) for r in caplog.records]
        assert (logging.INFO, f"model m: rolled back by an admin to version {k} "
                f"(published as version {k + 1}); reloading from it") in said, said  # fmt: skip
        assert not [m for lvl, m in said if lvl >= logging.WARNING], said
    finally:
        await store.close()


async def test_a_drained_stream_is_published_at_once(settings: Settings) -> None:
    """With publish_ms and commit_ms at a minute, a version covering the last entry still
    appears as soon as the worker finds nothing more to read."""
    s = settings.model_copy(update={"publish_ms": 60_000, "commit_ms": 60_000})
    store = Store.open(s)
    try:
        sp = spec("perceptron")
        stream = batches(2000, 11)
        await store.create_model("m", sp)
        worker = Worker(s, store)
        task = asyncio.create_task(worker.run())
        for part in (stream[:3], stream[3:]):
            last = None
            for b in part:
                last = (await store.append("m", b)).entry_id
            for _ in range(400):
                head = await store.head("m")
                if head and (await store.get_version("m", head)).info.cursor == last:
                    break
                await asyncio.sleep(0.025)
            else:
                raise AssertionError("no version covers the last entry")
        worker.stop()
        await asyncio.wait_for(task, 30)
        v = await store.get_version("m")
        assert v.serving["W"].tobytes() == reference(sp, stream).serving().W.tobytes()
    finally:
        await store.close()


async def test_a_deleted_model_is_dropped(store: Store) -> None:
    await store.create_model("m", spec("perceptron"))
    await append_all(store, "m", batches(200, 12))
    worker = Worker(store.settings, store)
    await worker._maintain()
    assert "m" in worker.held
    await store.delete_model("m")
    await worker._maintain()
    assert worker.held == {}


async def test_an_unbuildable_spec_is_skipped(store: Store) -> None:
    await store.create_model("bad", {"algorithm": "no-such-thing"})
    await store.create_model("ok", spec("perceptron"))
    k = store.keys  # entries the model can never learn must not keep a burst worker running
    await store.client.xadd(k.examples("bad"), {"b": b"x", "n": 1})
    await append_all(store, "ok", batches(500, 7))
    worker = Worker(store.settings, store)
    await asyncio.wait_for(worker.run(burst=True), 30)
    assert "bad" not in worker.held and (await store.metrics("ok")).lag == 0
    assert await store.lease_holder("bad") is None


async def test_cancel_ends_the_worker_and_releases(settings: Settings) -> None:
    """Cancelling a worker's task ends it (releasing its lease), even when the cancellation
    lands inside a Redis call, where redis-py on Python < 3.12 may swallow it."""
    store = Store.open(settings)
    try:
        await store.create_model("m", spec("perceptron"))
        for i in range(20):
            await append_all(store, "m", batches(50, i))  # work: the worker takes the lease
            worker = Worker(settings, store, worker_id=f"c{i}")
            task = asyncio.create_task(worker.run())
            await asyncio.sleep(0.03 + (i % 7) * 0.003)
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=5)
            if not done:
                worker.stop()
                await task
            assert done, f"cancel #{i} was swallowed: the worker kept running"
            assert await store.lease_holder("m") is None
    finally:
        await store.close()


def test_signal_handler_first_stops_second_exits() -> None:
    class FakeWorker:
        stopping = False

        def stop(self) -> None:
            self.stopping = True

    exits: list[int] = []
    worker = FakeWorker()
    handler = signal_handler(worker, exits.append)  # type: ignore[arg-type]
    handler(signal.SIGTERM)
    assert worker.stopping and exits == []
    handler(signal.SIGTERM)
    assert exits == [128 + signal.SIGTERM]


def _env(settings: Settings) -> dict[str, str]:
    from tests.store.pipeline_support import worker_env

    return worker_env(settings)


async def test_sigterm_commits_releases_and_exits_zero(settings: Settings, tmp_path: Path) -> None:
    """A worker subprocess stopped with SIGTERM mid-stream exits 0 with its leases released
    and everything it learned committed; a later worker finishes to the reference result."""
    store = Store.open(settings)
    try:
        sp = spec("pa1", C=1.0)
        stream = batches(60_000, 8, lo=500, hi=1500)
        await store.create_model("m", sp)
        await append_all(store, "m", stream)
        log = tmp_path / "worker.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "workers", "--worker-id", "sub"],
                cwd=REPO,
                env=_env(settings),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + 60
            while (await store.metrics("m")).applied == 0 and time.monotonic() < deadline:
                assert proc.poll() is None, log.read_text()
                await asyncio.sleep(0.02)
            proc.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(proc.wait, 30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert code == 0, log.read_text()
        assert await store.lease_holder("m") is None
        assert [w.worker_id for w in await store.workers()] == []
        assert "signal" in log.read_text()
        await Worker(settings, store).run(burst=True)
        committed = await store.load_state("m")
        assert committed.state is not None
        assert_same(committed.state, reference(sp, stream).get_state(), "after SIGTERM")
    finally:
        await store.close()


def test_cli_worker_burst(settings: Settings) -> None:
    """``streamlearn worker --burst`` runs the same worker with the flags on top of the env."""
    from typer.testing import CliRunner

    from service.cli.app import app

    sp = spec("perceptron")
    stream = batches(2000, 9)

    async def prepare() -> None:
        st = Store.open(settings)
        await st.create_model("m", sp)
        await append_all(st, "m", stream)
        await st.close()

    asyncio.run(prepare())
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLEARN_")}
    env.update({"STREAMLEARN_COMMIT_MS": "20", "STREAMLEARN_BLOCK_MS": "20"})
    result = CliRunner().invoke(
        app,
        [
            "worker",
            "--burst",
            "--redis-url",
            settings.redis_url or "",
            "--key-prefix",
            settings.key_prefix,
        ],
        env=env,
    )
    assert result.exit_code == 0, result.output

    async def check() -> dict:
        st = Store.open(settings)
        try:
            return (await st.load_state("m")).state or {}
        finally:
            await st.close()

    assert_same(asyncio.run(check()), reference(sp, stream).get_state(), "cli")
