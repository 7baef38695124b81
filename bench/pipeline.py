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
    with 5 % label noise (so that PA-I keeps updating and the update path is exercised)."""
    dim = 1 << bits
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.integers(0, dim, size=(n, nnz), dtype=np.int64), axis=1)
    keep = np.ones((n, nnz), dtype=bool)
    keep[:, 1:] = idx[:, 1:] != idx[:, :-1]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=indptr[1:])
    indices = idx[keep].astype(np.int32)
    data = rng.random(indices.shape[0]) + 0.1
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


def _naive_producer(url: str, stream: str, n: int, bits: int, nnz: int, batch: int) -> None:
    import redis  # bench code, not service code: the layout rule is about service/

    data = synthetic(n, bits, nnz)
    client = redis.Redis.from_url(url)
    y_signed = np.where(data.y == 1, 1, -1)
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
    client.close()


def naive_run(url: str, n: int, bits: int, nnz: int, batch: int, c: float = 1.0) -> float:
    """Examples/s end to end (first append → last example learned and acknowledged)."""
    import redis

    client = redis.Redis.from_url(url)
    stream, group = f"bench-naive-{uuid.uuid4().hex[:8]}", "g"
    client.xgroup_create(stream, group, id="0", mkstream=True)
    w = np.zeros(1 << bits)
    b = 0.0
    seen = 0
    proc = mp.get_context("spawn").Process(
        target=_naive_producer, args=(url, stream, n, bits, nnz, batch)
    )
    try:
        proc.start()
        t0 = time.perf_counter()
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
        elapsed = time.perf_counter() - t0
    finally:
        proc.join(60)
        if proc.is_alive():
            proc.kill()
        client.delete(stream)
        client.close()
    return n / elapsed


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
    args = ap.parse_args(argv)

    naive = Row("naive")
    for _ in range(args.runs):
        naive.values.append(
            naive_run(args.redis_url, args.naive_n, args.bits, args.nnz, args.batch)
        )
    print(table("Naive baseline", [("examples/s (median)", f"{naive.median():,.0f}")]))
    asyncio.run(asyncio.sleep(0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
