"""Pipeline benchmark: Store.append + one Worker, against a naive Redis-stream baseline.

One run, side by side, on the same synthetic stream (``--n`` examples, ~``--nnz`` non-zeros
each, ``2**--bits`` dimensions, PA-I), both against the same Redis:

* **streamlearn** — batches of ``--batch`` examples go through ``Store.append`` (one compact
  binary entry per batch) while one in-process ``Worker`` learns them through the compiled
  batch path; we time from the first append until the committed state covers the last entry
  (lag zero). Commit and publish latencies come from wrapping the worker's store calls.
  Then ``--bursts`` bursts of one batch each on an idle worker: the time from the append's
  return until a version covering it is visible (what a serving API would wait for).
* **naive** — one JSON entry per example (XADD, pipelined per batch), one consumer doing
  XREADGROUP + ``orjson.loads`` + a per-example numpy PA-I update + XACK.

In both, the producer is a separate process (so it does not share the GIL with the learner),
and the figures are medians over ``--runs`` runs. Run from the repository root::

    python3 bench/pipeline.py                   # the full benchmark (Redis at 127.0.0.1:6379)
    python3 bench/pipeline.py --n 20000 --runs 1  # a quick look

Every key lives under a fresh prefix and is deleted at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import multiprocessing as mp
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.learning.features import Batch

# --------------------------------------------------------------------------------------------
# The synthetic stream (deterministic in its seed; the producer process rebuilds it)


def synthetic(n: int, bits: int, nnz: int, seed: int = 0) -> Batch:
    """``n`` sparse examples, ~``nnz`` positive values each, labelled by a hidden hyperplane
    with 5 % label noise (so that PA-I keeps updating and the update path is exercised).

    Values are float64 that float32 cannot hold (the codec's worst case), or with
    ``BENCH_VALUES=float32`` (the ``--values`` flag; spawned producers inherit it) rounded to
    float32, as counts, binary or float32-born features are.
    """
    dim = 1 << bits
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.integers(0, dim, size=(n, nnz), dtype=np.int64), axis=1)
    keep = np.ones((n, nnz), dtype=bool)
    keep[:, 1:] = idx[:, 1:] != idx[:, :-1]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=indptr[1:])
    indices = idx[keep].astype(np.int32)
    data = np.asarray(rng.random(indices.shape[0]) + 0.1, dtype=np.float64)
    if os.environ.get("BENCH_VALUES", "float64") == "float32":
        data = data.astype(np.float32).astype(np.float64)
    w_true = rng.standard_normal(dim)
    margin = np.add.reduceat(w_true[indices] * data, indptr[:-1])
    y = (margin > 0).astype(np.int32)
    flip = rng.random(n) < 0.05
    y[flip] = 1 - y[flip]
    return Batch(indptr, indices, data, y)


def chunks(batch: Batch, size: int) -> Iterator[Batch]:
    for start in range(0, batch.n, size):
        yield batch.slice(start, min(start + size, batch.n))


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(xs, q)) if xs else float("nan")


# --------------------------------------------------------------------------------------------
# The naive baseline: one JSON entry per example, a per-example numpy update


def _naive_producer(
    url: str, stream: str, n: int, bits: int, nnz: int, batch: int, out: Any
) -> None:
    import redis  # bench code, not service code: the layout rule is about service/

    data = synthetic(n, bits, nnz)
    client: Any = redis.Redis.from_url(url)
    y_signed = np.where(data.y == 1, 1, -1)
    out.put(("start", time.monotonic()))
    for start in range(0, n, batch):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(start + batch, n)):
            lo, hi = data.indptr[i], data.indptr[i + 1]
            features = dict(
                zip(map(str, data.indices[lo:hi].tolist()), data.data[lo:hi].tolist(), strict=True)
            )
            entry = orjson.dumps({"features": features, "label": int(y_signed[i])})
            pipe.xadd(stream, {"e": entry})
        pipe.execute()
    out.put(("done", time.monotonic()))
    client.close()


def naive_run(url: str, n: int, bits: int, nnz: int, batch: int, c: float = 1.0) -> float:
    """Examples/s end to end (first append → last example learned and acknowledged)."""
    import redis

    client: Any = redis.Redis.from_url(url)
    stream, group = f"bench-naive-{uuid.uuid4().hex[:8]}", "g"
    client.xgroup_create(stream, group, id="0", mkstream=True)
    w = np.zeros(1 << bits)
    b = 0.0
    seen = 0
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_naive_producer, args=(url, stream, n, bits, nnz, batch, queue))
    try:
        proc.start()
        _, t0 = queue.get(True, 120)
        while seen < n:
            reply = client.xreadgroup(group, "c", {stream: ">"}, count=batch, block=100)
            if not reply:
                continue
            entries = reply[0][1]
            for _entry_id, fields in entries:
                ex = orjson.loads(fields[b"e"])
                f = ex["features"]
                idx = np.fromiter(map(int, f.keys()), dtype=np.int64, count=len(f))
                val = np.fromiter(f.values(), dtype=np.float64, count=len(f))
                y = ex["label"]
                loss = 1.0 - y * (float(w[idx] @ val) + b)
                if loss > 0:
                    tau = min(c, loss / float(val @ val))
                    w[idx] += tau * y * val
                    b += y
            client.xack(stream, group, *[e[0] for e in entries])
            seen += len(entries)
        elapsed = time.monotonic() - t0
    finally:
        proc.join(60)
        if proc.is_alive():
            proc.kill()
        client.delete(stream)
        client.close()
    return n / elapsed


# --------------------------------------------------------------------------------------------
# streamlearn: Store.append in a producer process, one Worker in this process


def _settings(url: str, prefix: str, **overrides: Any) -> Any:
    from service.settings import Settings

    return Settings(redis_url=url, key_prefix=prefix, **overrides)


def _spec(bits: int) -> dict[str, Any]:
    from service.learning.spec import ModelSpec

    return ModelSpec.from_dict(
        {"algorithm": "pa1", "params": {"C": 1.0}, "dim": 1 << bits, "hashing": False}
    ).to_dict()


def _store_producer(
    url: str, prefix: str, n: int, bits: int, nnz: int, batch: int, out: Any
) -> None:
    """Append the stream through ``Store.append``, one call per batch; report the times."""
    from service.store import Store

    data = synthetic(n, bits, nnz)
    parts = list(chunks(data, batch))

    async def run() -> None:
        store = Store.open(_settings(url, prefix))
        out.put(("start", time.monotonic()))
        last = None
        for part in parts:
            last = (await store.append("bench", part)).entry_id
        out.put(("done", time.monotonic(), last))
        await store.close()

    asyncio.run(run())


@dataclass
class Instrumented:
    """Wraps the worker's ``store.commit`` to time every commit and see every publish."""

    commits: list[float] = field(default_factory=list)  # seconds, commit without a version
    publishes: list[float] = field(default_factory=list)  # seconds, commit + publish
    landed: list[tuple[float, str, int | None]] = field(default_factory=list)  # (t, cursor, v)

    def wrap(self, store: Any) -> None:
        inner = store.commit

        async def commit(*args: Any, **kwargs: Any) -> Any:
            t0 = time.monotonic()
            result = await inner(*args, **kwargs)
            t1 = time.monotonic()
            (self.publishes if kwargs.get("serving") is not None else self.commits).append(t1 - t0)
            self.landed.append((t1, kwargs["cursor"], result.version))
            return result

        store.commit = commit

    def first_covering(self, entry_id: str, published: bool) -> float | None:
        """When the first commit (or version) covering ``entry_id`` landed."""
        want = _id(entry_id)
        for t, cursor, version in self.landed:
            if _id(cursor) >= want and (version is not None or not published):
                return t
        return None


def _id(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


@dataclass
class PipelineRun:
    end_to_end: float  # examples/s, first append -> last entry committed
    append_rate: float  # examples/s of the producer alone
    freshness_ms: float  # last append acknowledged -> a version covering it
    committed_ms: float  # last append acknowledged -> a commit covering it
    commit_ms: list[float]
    publish_ms: list[float]


async def _wait_for(pred: Callable[[], Any], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError("the worker did not catch up")
        await asyncio.sleep(0.001)


async def pipeline_run(url: str, n: int, bits: int, nnz: int, batch: int) -> PipelineRun:
    """Producer process appending while one in-process worker learns, concurrently."""
    from service.store import Store
    from workers.trainer import Worker

    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    settings = _settings(url, prefix)
    store = Store.open(settings)
    await store.create_model("bench", _spec(bits))
    probe = Instrumented()
    probe.wrap(store)
    worker = Worker(settings, store, worker_id="bench")
    task = asyncio.create_task(worker.run())
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_store_producer, args=(url, prefix, n, bits, nnz, batch, queue))
    try:
        proc.start()
        _, t_start = await asyncio.to_thread(queue.get, True, 120)
        _, t_done, last_id = await asyncio.to_thread(queue.get, True, 600)
        await _wait_for(lambda: probe.first_covering(last_id, published=True) is not None, 120)
        t_committed = probe.first_covering(last_id, published=False)
        t_published = probe.first_covering(last_id, published=True)
        assert t_committed is not None and t_published is not None
        metrics = await store.metrics("bench")
        assert metrics.examples_seen == n and metrics.lag == 0, metrics
        return PipelineRun(
            end_to_end=n / (t_committed - t_start),
            append_rate=n / (t_done - t_start),
            freshness_ms=1000 * (t_published - t_done),
            committed_ms=1000 * (t_committed - t_done),
            commit_ms=[1000 * x for x in probe.commits],
            publish_ms=[1000 * x for x in probe.publishes],
        )
    finally:
        worker.stop()
        await task
        proc.join(30)
        await store.delete_model("bench")
        _drop_prefix(url, prefix)
        await store.close()


async def catch_up_run(url: str, n: int, bits: int, nnz: int, batch: int) -> float:
    """Examples/s of one worker learning a stream appended beforehand (no producer)."""
    from service.store import Store
    from workers.trainer import Worker

    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    settings = _settings(url, prefix)
    store = Store.open(settings)
    await store.create_model("bench", _spec(bits))
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_store_producer, args=(url, prefix, n, bits, nnz, batch, queue))
    proc.start()
    await asyncio.to_thread(queue.get, True, 120)
    await asyncio.to_thread(queue.get, True, 600)
    proc.join(30)
    try:
        t0 = time.monotonic()
        await Worker(settings, store, worker_id="bench").run(burst=True)
        elapsed = time.monotonic() - t0
        metrics = await store.metrics("bench")
        assert metrics.examples_seen == n and metrics.lag == 0, metrics
        return n / elapsed
    finally:
        await store.delete_model("bench")
        _drop_prefix(url, prefix)
        await store.close()


async def burst_latencies(url: str, bits: int, nnz: int, batch: int, bursts: int) -> list[float]:
    """Milliseconds from ``append`` returning to a version covering it, for single-batch
    bursts on an otherwise idle worker (what a client posting now and then sees)."""
    from service.store import Store
    from workers.trainer import Worker

    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    settings = _settings(url, prefix)
    store = Store.open(settings)
    await store.create_model("bench", _spec(bits))
    probe = Instrumented()
    probe.wrap(store)
    producer = Store.open(settings)
    worker = Worker(settings, store, worker_id="bench")
    task = asyncio.create_task(worker.run())
    data = list(chunks(synthetic(bursts * batch, bits, nnz, seed=1), batch))
    out: list[float] = []
    try:
        rng = np.random.default_rng(0)
        for part in data:
            await asyncio.sleep(float(rng.uniform(0.3, 0.6)))
            entry = (await producer.append("bench", part)).entry_id
            t_acked = time.monotonic()
            assert entry is not None
            covered = functools.partial(probe.first_covering, entry, published=True)
            await _wait_for(covered, 10)
            t_pub = probe.first_covering(entry, published=True)
            assert t_pub is not None
            out.append(1000 * (t_pub - t_acked))
        return out
    finally:
        worker.stop()
        await task
        await store.delete_model("bench")
        _drop_prefix(url, prefix)
        await store.close()
        await producer.close()


def breakdown(url: str, n: int, bits: int, nnz: int, batch: int) -> list[tuple[str, str]]:
    """Where one worker's time goes, stage by stage, without asyncio or the worker loop:
    XREAD of the pre-filled stream (sync client), decode, learn — each as examples/s."""
    import redis

    from service.learning.registry import make_learner
    from service.store.codec import decode_batch, encode_batch

    parts = list(chunks(synthetic(n, bits, nnz), batch))
    payloads, t_encode = timed(lambda: [encode_batch(b) for b in parts])
    client: Any = redis.Redis.from_url(url)
    key = f"bench-breakdown-{uuid.uuid4().hex[:8]}"
    try:
        pipe = client.pipeline(transaction=False)
        for p in payloads:
            pipe.xadd(key, {"b": p})
        _, t_xadd = timed(pipe.execute)

        def read_all() -> list[bytes]:
            out, last = [], "0-0"
            while got := client.xread({key: last}, count=20):
                out += [f[b"b"] for _, f in got[0][1]]
                last = got[0][1][-1][0]
            return out

        raw, t_read = timed(read_all)
    finally:
        client.delete(key)
        client.close()
    batches, t_decode = timed(lambda: [decode_batch(p)[0] for p in raw])
    learner = make_learner("pa1", 1 << bits)
    _, t_learn = timed(lambda: [learner.learn(b) for b in batches])
    per_example = sum(len(p) for p in payloads) / n
    return [
        ("stream bytes per example", f"{per_example:,.0f}"),
        ("encode_batch", f"{n / t_encode:,.0f}"),
        ("XADD, pipelined, sync client", f"{n / t_xadd:,.0f}"),
        ("XREAD of the whole stream, sync client", f"{n / t_read:,.0f}"),
        ("decode_batch", f"{n / t_decode:,.0f}"),
        ("learn (PA-I, compiled)", f"{n / t_learn:,.0f}"),
        ("read + decode + learn, serial", f"{n / (t_read + t_decode + t_learn):,.0f}"),
    ]


def _drop_prefix(url: str, prefix: str) -> None:
    """Delete what ``delete_model`` keeps on purpose (the fencing epoch) under our prefix."""
    import redis

    client: Any = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def _warm_up() -> None:
    """Load the compiled kernels once, so that no run pays numba's cache load."""
    from service.learning.registry import make_learner

    make_learner("pa1", 8).learn(Batch.from_rows([([1], [1.0])], [1]))


# --------------------------------------------------------------------------------------------
# Tables


@dataclass
class Row:
    name: str
    values: list[float] = field(default_factory=list)

    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")


def table(title: str, rows: list[tuple[str, str]]) -> str:
    width = max(len(r[0]) for r in rows)
    lines = [title, "-" * len(title)]
    lines += [f"{name:<{width}}  {value:>14}" for name, value in rows]
    return "\n".join(lines)


def timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--naive-n", type=int, default=50_000, help="examples for the naive baseline")
    ap.add_argument("--bits", type=int, default=18)
    ap.add_argument("--nnz", type=int, default=100)
    ap.add_argument("--batch", type=int, default=1_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bursts", type=int, default=20)
    ap.add_argument(
        "--values",
        choices=["float64", "float32"],
        default="float64",
        help="feature values: float64 (12 bytes a non-zero in an entry) or float32-exact (8)",
    )
    args = ap.parse_args(argv)
    os.environ["BENCH_VALUES"] = args.values

    _warm_up()
    runs: list[PipelineRun] = []
    catch_up: list[float] = []
    naive: list[float] = []
    for r in range(args.runs):
        print(f"run {r + 1}/{args.runs} …", file=sys.stderr, flush=True)
        runs.append(
            asyncio.run(pipeline_run(args.redis_url, args.n, args.bits, args.nnz, args.batch))
        )
        catch_up.append(
            asyncio.run(catch_up_run(args.redis_url, args.n, args.bits, args.nnz, args.batch))
        )
        naive.append(naive_run(args.redis_url, args.naive_n, args.bits, args.nnz, args.batch))
    bursts = asyncio.run(
        burst_latencies(args.redis_url, args.bits, args.nnz, args.batch, args.bursts)
    )
    load = os.getloadavg()[0]

    med = statistics.median
    e2e = med(r.end_to_end for r in runs)
    commit_all = [x for r in runs for x in r.commit_ms]
    publish_all = [x for r in runs for x in r.publish_ms]
    print(
        f"\nPipeline benchmark: {args.n:,} examples, ~{args.nnz} non-zeros, 2**{args.bits} dims, "
        f"batches of {args.batch:,}, {args.values} values, PA-I; medians of {args.runs} runs; "
        f"Redis {args.redis_url}; "
        f"{os.cpu_count()} CPUs, load average {load:.1f} at the end\n"
    )
    print(
        table(
            "Throughput (examples/s)",
            [
                ("streamlearn end to end (append ‖ learn)", f"{e2e:,.0f}"),
                (
                    "streamlearn appends alone (Store.append)",
                    f"{med(r.append_rate for r in runs):,.0f}",
                ),
                ("streamlearn one worker, stream pre-filled", f"{med(catch_up):,.0f}"),
                (f"naive end to end ({args.naive_n:,} examples)", f"{med(naive):,.0f}"),
                ("ratio end to end / naive", f"{e2e / med(naive):.1f}x"),
                ("ratio one worker / naive", f"{med(catch_up) / med(naive):.1f}x"),
            ],
        )
    )
    print()
    print(
        table(
            "Latency (ms)",
            [
                ("commit p50 / p99", f"{pct(commit_all, 50):.1f} / {pct(commit_all, 99):.1f}"),
                (
                    "commit + publish p50 / p99",
                    f"{pct(publish_all, 50):.1f} / {pct(publish_all, 99):.1f}",
                ),
                ("last append -> commit (stream)", f"{med(r.committed_ms for r in runs):.0f}"),
                ("last append -> version (stream)", f"{med(r.freshness_ms for r in runs):.0f}"),
                (
                    f"burst append -> version p50 / p99 ({len(bursts)})",
                    f"{pct(bursts, 50):.0f} / {pct(bursts, 99):.0f}",
                ),
            ],
        )
    )
    print()
    print(
        table(
            "One worker, stage by stage (examples/s, one run)",
            breakdown(args.redis_url, args.n, args.bits, args.nnz, args.batch),
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
