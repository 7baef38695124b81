"""Many models: memory per model and idle cost against the number of models, in one run.

Starts a private ``redis-server`` (loopback, no persistence: nothing else is disturbed), one
API process (``python -m service.cli api``) and one worker (``python -m service.cli
worker``), then grows the number of models through ``--counts`` (default 10, 100, 1,000,
5,000; the models of one step stay for the next). At each step the new models are created
with the spam preset (``{"preset": "spam"}``), fed ``--examples`` short synthetic messages
each (``bench/textgen.py``) in one request, learned by the worker (each publishes a version),
and up to ``--serve`` of them served once by the API (one prediction: the API loads the
model's head, up to its ``model_cache_bytes`` bound). Then everything is left idle for ``--settle`` seconds (longer
than the worker's ``idle_release_s``, set to ``--idle-release``, so it has let every model
go) and measured:

- **memory per model**: Redis ``used_memory``, API RSS and worker RSS above what they were
  before the first model, divided by the number of models (the API's by the models its cache
  holds, also shown);
- **idle cost** over ``--window`` seconds: CPU % of the API and the worker (``/proc``), and
  Redis commands per second (``INFO commandstats``: every command, those run inside scripts
  included, minus the two ``INFO`` calls of the measurement);
- **GET /metrics**: latency, median of ``--metrics-reps`` scrapes (after the idle window,
  so they are not counted in it).

    python3 bench/models.py                             # 10, 100, 1,000, 5,000 models
    python3 bench/models.py --counts 10,100 --window 5  # a quick look
    python3 bench/models.py --counts 10,100,300 --src /path/to/main   # a baseline tree

The machine is shared: CPU % and latencies are noisy (the load average is printed).
"""

# ruff: noqa: E402  (the imports follow the sys.path fix below, on purpose)
from __future__ import annotations

import sys
from pathlib import Path

# bench/http.py is named like the standard library's `http`: drop this directory from the path
# before anything imports `http`.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import argparse
import asyncio
import itertools
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
import redis.asyncio as aioredis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scale import Conn, cpu_seconds, free_port, wait_healthy
from bench.textgen import SpamStream
from tests.redis_servers import RedisServer

MiB = 1024 * 1024


def rss(pid: int) -> int:
    """Resident bytes of one process (``/proc/PID/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def commands(r: Any) -> int:
    stats = await r.info("commandstats")
    return sum(int(v["calls"]) for v in stats.values())


@dataclass
class Row:
    models: int
    redis_mib: float
    api_mib: float
    api_cached: int
    worker_mib: float
    api_cpu: float
    worker_cpu: float
    redis_cpu: float
    cmds: float
    metrics_ms: float
    metrics_kib: float
    setup_s: float


async def request(c: Conn, method: str, path: str, body: bytes = b"") -> bytes:
    """The answer's body; a 503 (a Redis call timed out on this busy machine) is retried."""
    for _ in range(10):
        status, data = await c.request(method, path, body)
        if status != 503:
            break
        await asyncio.sleep(0.5)
    if status >= 300:
        raise RuntimeError(f"{method} {path}: {status} {data[:300]!r}")
    return data


async def add_models(port: int, names: list[str], examples: int, seed: int, conns: int) -> None:
    """Create, feed and (once learned) serve ``names``, ``conns`` requests at a time."""
    stream = SpamStream(seed=seed).examples(examples * len(names))
    bodies = []
    for _ in names:
        rows = [
            {"text": e["text"], "label": e["label"]} for e in itertools.islice(stream, examples)
        ]
        bodies.append(orjson.dumps({"examples": rows}))
    spec = orjson.dumps({"preset": "spam"})
    todo = list(zip(names, bodies, strict=True))

    async def feeder() -> None:
        c = await Conn(port).open()
        try:
            while todo:
                m, body = todo.pop()
                await request(c, "PUT", f"/models/{m}", spec)
                await request(c, "POST", f"/models/{m}/examples", body)
        finally:
            c.close()

    await asyncio.gather(*(feeder() for _ in range(conns)))


async def wait_learned(r: Any, prefix: str, names: list[str], timeout: float) -> None:
    """Until every model has a version (its examples learned and published)."""
    deadline = time.monotonic() + timeout
    left = list(names)
    while left:
        heads = await r.mget([f"{prefix}:{{{m}}}:head" for m in left])
        left = [m for m, h in zip(left, heads, strict=True) if h is None]
        if not left:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(left)} models not learned after {timeout} s")
        await asyncio.sleep(0.5)


async def serve(port: int, names: list[str], conns: int) -> None:
    todo = list(names)
    body = orjson.dumps({"text": "are you free for lunch tomorrow"})

    async def one() -> None:
        c = await Conn(port).open()
        try:
            while todo:
                m = todo.pop()
                await request(c, "POST", f"/models/{m}/predict?feedback=false", body)
        finally:
            c.close()

    await asyncio.gather(*(one() for _ in range(conns)))


async def scrape(port: int, reps: int) -> tuple[float, int]:
    """Median GET /metrics latency (ms) and the body size."""
    c = await Conn(port).open()
    times, size = [], 0
    try:
        for _ in range(reps):
            t = time.perf_counter()
            size = len(await request(c, "GET", "/metrics"))
            times.append(1000 * (time.perf_counter() - t))
    finally:
        c.close()
    return statistics.median(times), size


def cached_models(text: bytes) -> int:
    for line in text.decode().splitlines():
        if line.startswith("streamlearn_cache_models "):
            return int(float(line.split()[1]))
    return 0


async def run(args: argparse.Namespace) -> list[Row]:
    counts = sorted(int(x) for x in args.counts.split(","))
    prefix = f"bm{uuid.uuid4().hex[:8]}"
    logdir = Path(tempfile.mkdtemp(prefix="sl-models-"))
    rows: list[Row] = []
    with RedisServer(extra_args=["--appendonly", "no"]) as server:
        src = Path(args.src).resolve() if args.src else ROOT
        env = {
            **os.environ,
            "PYTHONPATH": str(src),
            "STREAMLEARN_REDIS_URL": server.url,
            "STREAMLEARN_KEY_PREFIX": prefix,
            "STREAMLEARN_IDLE_RELEASE_S": str(args.idle_release),
        }
        port = free_port()
        api_log = (logdir / "api.log").open("wb")
        worker_log = (logdir / "worker.log").open("wb")
        py = sys.executable
        api = subprocess.Popen(
            [py, "-m", "service.cli", "api", "--port", str(port), "--log-level", "warning"],
            env=env,
            cwd=src,
            stdout=api_log,
            stderr=api_log,
        )
        worker = subprocess.Popen(
            [py, "-m", "service.cli", "worker", "--log-level", "WARNING"],
            env=env,
            cwd=src,
            stdout=worker_log,
            stderr=worker_log,
        )
        r = aioredis.Redis.from_url(server.url)
        assert server.proc is not None
        redis_pid = server.proc.pid
        try:
            await wait_healthy(port)
            # warm up (numba compiles, imports), then take the baseline with no model left
            await add_models(port, ["warmup"], args.examples, 999, 1)
            await wait_learned(r, prefix, ["warmup"], 300)
            await serve(port, ["warmup"], 1)
            c = await Conn(port).open()
            await request(c, "DELETE", "/models/warmup")
            c.close()
            await asyncio.sleep(args.settle)
            base_redis = int((await r.info("memory"))["used_memory"])
            base_api, base_worker = rss(api.pid), rss(worker.pid)
            have = 0
            for n in counts:
                started = time.monotonic()
                names = [f"m{i:05d}" for i in range(have, n)]
                await add_models(port, names, args.examples, n, args.conns)
                await wait_learned(r, prefix, names, args.timeout)
                await serve(port, names[: args.serve], args.conns)
                setup = time.monotonic() - started
                have = n
                await asyncio.sleep(args.settle)
                pids = {"api": api.pid, "worker": worker.pid, "redis": redis_pid}
                cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
                cmd0, t0 = await commands(r), time.monotonic()
                await asyncio.sleep(args.window)
                cmd1, t1 = await commands(r), time.monotonic()
                cpu1 = {k: cpu_seconds(p) for k, p in pids.items()}
                span = t1 - t0
                cpu = {k: 100 * (cpu1[k] - cpu0[k]) / span for k in pids}
                used = int((await r.info("memory"))["used_memory"])
                api_rss, worker_rss = rss(api.pid), rss(worker.pid)
                c = await Conn(port).open()
                cached = cached_models(await request(c, "GET", "/metrics"))
                c.close()
                ms, size = await scrape(port, args.metrics_reps)
                row = Row(
                    models=n,
                    redis_mib=(used - base_redis) / n / MiB,
                    api_mib=(api_rss - base_api) / max(1, cached) / MiB,
                    api_cached=cached,
                    worker_mib=(worker_rss - base_worker) / n / MiB,
                    api_cpu=cpu["api"],
                    worker_cpu=cpu["worker"],
                    redis_cpu=cpu["redis"],
                    cmds=(cmd1 - cmd0 - 1) / span,  # the INFO that opened the window
                    metrics_ms=ms,
                    metrics_kib=size / 1024,
                    setup_s=setup,
                )
                rows.append(row)
                print(line(row), flush=True)
        finally:
            for p in (api, worker):
                if p.poll() is None:
                    p.terminate()
            for p in (api, worker):
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
            await r.aclose()
            api_log.close()
            worker_log.close()
    print(f"logs: {logdir}", file=sys.stderr)
    return rows


HEADER = (
    "| models | Redis MiB/model | API MiB/served model (served) | worker MiB/model "
    "| API CPU % | worker CPU % | Redis CPU % | Redis cmd/s | GET /metrics ms (KiB) | setup s |\n"
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def line(r: Row) -> str:
    return (
        f"| {r.models:,} | {r.redis_mib:.3f} | {r.api_mib:.2f} ({r.api_cached:,}) "
        f"| {r.worker_mib:.3f} | {r.api_cpu:.2f} | {r.worker_cpu:.2f} | {r.redis_cpu:.2f} "
        f"| {r.cmds:.1f} | {r.metrics_ms:.1f} ({r.metrics_kib:,.0f}) | {r.setup_s:.0f} |"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--counts", default="10,100,1000,5000", help="numbers of models, growing")
    p.add_argument("--examples", type=int, default=50, help="messages learned per model")
    p.add_argument("--window", type=float, default=10.0, help="idle seconds measured")
    p.add_argument("--settle", type=float, default=8.0, help="idle seconds before measuring")
    p.add_argument("--idle-release", type=float, default=5.0, help="the worker's idle_release_s")
    p.add_argument("--metrics-reps", type=int, default=7)
    p.add_argument("--conns", type=int, default=8, help="concurrent requests while setting up")
    p.add_argument(
        "--src",
        help="run the API and the worker from this source tree (a baseline checkout); "
        "the measurement is this script's either way",
    )
    p.add_argument(
        "--serve",
        type=int,
        default=200,
        help="new models served (predicted once) per step: the API's cache holds ~128 "
        "spam-preset models (model_cache_bytes 1 GiB), so serving more only costs time",
    )
    p.add_argument("--timeout", type=float, default=600.0, help="longest wait for learning")
    args = p.parse_args(argv)
    if args.settle <= args.idle_release:
        p.error("--settle must be longer than --idle-release (the worker must let go)")
    print(f"load average before: {os.getloadavg()[0]:.1f}", flush=True)
    print(HEADER, flush=True)
    rows = asyncio.run(run(args))
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
