"""HTTP benchmark: the streamlearn API against a naive FastAPI app, side by side, one run.

Both apps run as uvicorn subprocesses (one process each, same uvicorn options) on loopback,
against the same real Redis (``--redis``, default 127.0.0.1:6379) under a fresh key prefix
that is deleted at the end. The naive app is what one writes first: a pydantic model per
example, one ``XADD`` of the JSON per request, and a prediction that reads the weights from
Redis and hashes the features per request.

Scenarios (each bounded in requests and in seconds):

* single-example POST at ``--conns`` connections: req/s, p50, p99;
* single-example predict at ``--conns`` connections: req/s, p50, p99;
* batch ingest, 1,000 examples per request: examples/s;
* batch predict, 1,000 examples per request: examples/s;
* freshness (streamlearn only, with one worker process learning): while a background task
  ingests batches at ``--fresh-rate`` examples/s, probes are posted one at a time and, from
  each probe's 202, predictions are polled until the version they report covers it (its
  ``examples_seen`` reaches the probe's position in the stream): p50 and p99 of that delay.

The load generator is a small asyncio HTTP/1.1 client over raw streams (keep-alive, one
request in flight per connection), several times cheaper per request than httpx, so that on
a small machine it measures the servers more than itself. Run from the repository root::

    python3 bench/http.py            # the full run (~2 minutes)
    python3 bench/http.py --quick    # a quick look
"""

# ruff: noqa: E402  (the imports follow the sys.path fix below, on purpose)
from __future__ import annotations

import sys
from pathlib import Path

# This file is named like the standard library's `http` package: drop its directory from the
# path before anything imports `http` (starlette, uvicorn and redis do).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

N_FEATURES = 20
BITS = 18

# --------------------------------------------------------------------------------------------
# Data


def example(i: int, *, label: bool = True) -> dict[str, Any]:
    """A synthetic example: 20 named features out of a vocabulary of 5,000, label by a rule."""
    feats = {
        f"f{(i * 7919 + k * 104729) % 5000}": ((i + k) % 7) / 7.0 + 0.1 for k in range(N_FEATURES)
    }
    ex: dict[str, Any] = {"features": feats}
    if label:
        ex["label"] = 1 if sum(int(name[1:]) % 2 for name in feats) > N_FEATURES // 2 else -1
    return ex


# --------------------------------------------------------------------------------------------
# The naive app (served by `python bench/http.py naive-server`)


class Example(BaseModel):
    features: dict[str, float]
    label: int | None = None
    id: str | None = None


class Examples(BaseModel):
    examples: list[Example]


def naive_app(redis_url: str, prefix: str) -> Any:
    import mmh3
    import numpy as np
    import redis.asyncio as aioredis
    from fastapi import FastAPI

    app = FastAPI()
    r = aioredis.Redis.from_url(redis_url)
    dim = 1 << BITS

    def featurize(e: Example) -> tuple[np.ndarray, np.ndarray]:
        idx, val = [], []
        for name, v in e.features.items():
            h = mmh3.hash(name, 0, signed=True)
            idx.append(abs(h) % dim)
            val.append(v if h >= 0 else -v)
        return np.asarray(idx), np.asarray(val)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/models/{m}/examples", status_code=202)
    async def ingest(m: str, body: Examples | Example) -> dict[str, Any]:
        exs = body.examples if isinstance(body, Examples) else [body]
        payload = orjson.dumps([e.model_dump() for e in exs])
        await r.xadd(f"{prefix}:naive:{m}", {"data": payload})
        return {"accepted": len(exs), "ids": [e.id for e in exs]}

    @app.post("/models/{m}/predict")
    async def predict(m: str, body: Examples | Example) -> Any:
        raw = await r.get(f"{prefix}:naive:{m}:w")
        w = np.frombuffer(raw, dtype=np.float64) if raw else np.zeros(dim)
        exs = body.examples if isinstance(body, Examples) else [body]
        out = []
        for e in exs:
            idx, val = featurize(e)
            s = float(w[idx] @ val)
            out.append({"label": 1 if s > 0 else -1, "score": 1 / (1 + np.exp(-s)), "margin": s})
        return out[0] if isinstance(body, Example) else {"predictions": out}

    return app


# --------------------------------------------------------------------------------------------
# A lean HTTP/1.1 client


class Conn:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> Conn:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def request(
        self, method: str, path: str, body: bytes = b"", ctype: str = "application/json"
    ) -> tuple[int, bytes]:
        assert self.reader is not None and self.writer is not None
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        status = int(status_line.split(b" ", 2)[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        data = await self.reader.readexactly(length) if length else b""
        return status, data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


@dataclass
class LoadResult:
    requests: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000.0


async def load(
    port: int,
    make: Callable[[int], tuple[str, str, bytes, str]],
    *,
    conns: int,
    seconds: float,
    max_requests: int,
    warmup: int = 50,
) -> LoadResult:
    """``conns`` connections, each with one request in flight, until time or count runs out."""
    pool = [await Conn("127.0.0.1", port).open() for _ in range(conns)]
    for i in range(min(warmup, max_requests)):  # warm caches and connections, untimed
        await pool[i % conns].request(*make(i))
    res = LoadResult()
    counter = iter(range(10**12))
    start = time.perf_counter()
    end = start + seconds

    async def run(c: Conn) -> None:
        while True:
            i = next(counter)
            if i >= max_requests or time.perf_counter() > end:
                return
            t = time.perf_counter()
            status, _ = await c.request(*make(i))
            res.latencies.append(time.perf_counter() - t)
            res.statuses[status] = res.statuses.get(status, 0) + 1

    await asyncio.gather(*(run(c) for c in pool))
    res.seconds = time.perf_counter() - start
    res.requests = len(res.latencies)
    for c in pool:
        c.close()
    return res


# --------------------------------------------------------------------------------------------
# Servers


def start(cmd: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cmd, env={**os.environ, **env}, cwd=ROOT, stdout=subprocess.DEVNULL)


async def wait_healthy(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            c = await Conn("127.0.0.1", port).open()
            status, _ = await c.request("GET", "/healthz")
            c.close()
            if status == 200:
                return
        except OSError:
            pass
        await asyncio.sleep(0.2)
    raise RuntimeError(f"server on port {port} did not come up")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------------------------
# Scenarios


def single_post(i: int) -> tuple[str, str, bytes, str]:
    return ("POST", "/models/b/examples", orjson.dumps(example(i)), "application/json")


def single_predict(i: int) -> tuple[str, str, bytes, str]:
    return ("POST", "/models/b/predict", orjson.dumps(example(i, label=False)), "application/json")


def batches(size: int, label: bool) -> list[bytes]:
    return [
        orjson.dumps({"examples": [example(j * size + i, label=label) for i in range(size)]})
        for j in range(8)
    ]


def merge(parts: list[LoadResult]) -> LoadResult:
    out = LoadResult()
    for r in parts:
        out.requests += r.requests
        out.seconds += r.seconds
        out.latencies += r.latencies
        for k, v in r.statuses.items():
            out.statuses[k] = out.statuses.get(k, 0) + v
    return out


async def scenarios(
    ports: dict[str, int], args: argparse.Namespace
) -> dict[str, dict[str, LoadResult]]:
    """Each scenario runs the apps in alternating slices (``--rounds``), so that a change in
    the machine's load hits both alike."""
    post_batches = batches(1000, True)
    pred_batches = batches(1000, False)
    single = {"conns": args.conns, "max_requests": args.max_requests // args.rounds}
    batch = {"conns": 4, "max_requests": args.max_batches // args.rounds, "warmup": 4}
    plan: list[tuple[str, Callable[[int], tuple[str, str, bytes, str]], dict[str, Any]]] = [
        ("single POST", single_post, single),
        ("single predict", single_predict, single),
        (
            "batch ingest",
            lambda i: ("POST", "/models/b/examples", post_batches[i % 8], "application/json"),
            batch,
        ),
        (
            "batch predict",
            lambda i: ("POST", "/models/b/predict", pred_batches[i % 8], "application/json"),
            batch,
        ),
    ]
    parts: dict[str, dict[str, list[LoadResult]]] = {name: {} for name in ports}
    for scenario, make, kw in plan:
        for _ in range(args.rounds):
            for name, port in ports.items():
                r = await load(port, make, seconds=args.seconds / args.rounds, **kw)
                parts[name].setdefault(scenario, []).append(r)
    return {name: {sc: merge(rs) for sc, rs in by.items()} for name, by in parts.items()}


async def freshness(
    port: int, args: argparse.Namespace, m: str
) -> tuple[list[float], list[float], float]:
    """Delays from a probe's 202 to the first prediction whose version covers it, and the
    API's share of each: from the version's publication (its ``time``) to that prediction."""
    size = 500
    bodies = batches(size, True)
    appended = 0
    stop_at = time.perf_counter() + args.fresh_seconds
    versions: dict[int, tuple[int, float]] = {}
    meta = await Conn("127.0.0.1", port).open()

    async def version_meta(v: int) -> tuple[int, float]:
        if v not in versions:
            status, data = await meta.request("GET", f"/models/{m}/versions/{v}?format=json")
            doc = orjson.loads(data) if status == 200 else {"examples_seen": -1, "time": 0.0}
            versions[v] = (doc["examples_seen"], doc["time"])
        return versions[v]

    async def ingest() -> None:
        nonlocal appended
        c = await Conn("127.0.0.1", port).open()
        period = size / args.fresh_rate
        nxt = time.perf_counter()
        while time.perf_counter() < stop_at:
            status, _ = await c.request(
                "POST", f"/models/{m}/examples", bodies[appended // size % 8]
            )
            if status == 202:
                appended += size
            nxt += period
            await asyncio.sleep(max(0.0, nxt - time.perf_counter()))
        c.close()

    api_share: list[float] = []

    async def probe() -> list[float]:
        delays = []
        c = await Conn("127.0.0.1", port).open()
        p = await Conn("127.0.0.1", port).open()
        pred = orjson.dumps(example(1, label=False))
        await asyncio.sleep(0.5)
        while time.perf_counter() < stop_at - 1.0:
            await c.request("POST", f"/models/{m}/examples", orjson.dumps(example(7)))
            t0, wall0 = time.perf_counter(), time.time()
            position = appended + size + 1  # an upper bound on the probe's place in the stream
            last_v = -1
            while time.perf_counter() - t0 < 5.0:
                _, data = await p.request("POST", f"/models/{m}/predict", pred)
                v = orjson.loads(data)["version"]
                seen_at = time.time()
                if v and v != last_v:
                    last_v = v
                    covered, published = await version_meta(v)
                    if published >= wall0:  # published while we were polling: its swap delay
                        api_share.append(max(0.0, seen_at - published))
                    if covered >= position:
                        delays.append(time.perf_counter() - t0)
                        break
                await asyncio.sleep(0.002)
            await asyncio.sleep(0.05)
        c.close()
        p.close()
        return delays

    t = time.perf_counter()
    _, delays = await asyncio.gather(ingest(), probe())
    rate = appended / (time.perf_counter() - t)
    meta.close()
    return delays, api_share, rate


def pct(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def row(name: str, r: LoadResult, unit: int = 1) -> str:
    bad = {s: n for s, n in r.statuses.items() if s >= 300}
    return (
        f"| {name:<16} | {r.rps * unit:>12,.0f} | {r.pct(0.5):>8.1f} | {r.pct(0.99):>8.1f} | "
        f"{r.requests:>7} | {bad or '-'} |"
    )


async def main_async(args: argparse.Namespace) -> None:
    prefix = f"bench-http-{uuid.uuid4().hex[:8]}"
    env = {
        "STREAMLEARN_REDIS_URL": args.redis,
        "STREAMLEARN_KEY_PREFIX": prefix,
        "STREAMLEARN_MAX_LAG": str(10**9),
    }
    ours_port, naive_port = free_port(), free_port()
    ours = start(
        [
            sys.executable,
            "-m",
            "service.cli",
            "api",
            "--port",
            str(ours_port),
            "--log-level",
            "warning",
        ],
        env,
    )
    naive = start(
        [
            sys.executable,
            __file__,
            "naive-server",
            "--port",
            str(naive_port),
            "--redis",
            args.redis,
            "--prefix",
            prefix,
        ],
        env,
    )
    worker: subprocess.Popen[bytes] | None = None
    try:
        await asyncio.gather(wait_healthy(ours_port), wait_healthy(naive_port))
        c = await Conn("127.0.0.1", ours_port).open()
        spec = orjson.dumps({"algorithm": "pa1", "bits": BITS})
        for m in ["b"] + [f"f{ms}" for ms in args.publish_ms]:  # a fresh model per freshness run
            status, data = await c.request("PUT", f"/models/{m}", spec)
            assert status in (200, 201), data
        c.close()

        results = await scenarios({"naive": naive_port, "streamlearn": ours_port}, args)

        fresh = []
        for publish_ms in args.publish_ms:
            worker = start(
                [sys.executable, "-m", "workers"],
                {**env, "STREAMLEARN_PUBLISH_MS": str(publish_ms)},
            )
            await asyncio.sleep(3.0)  # let it take the leases (and compile) before measuring
            fresh.append((publish_ms, *await freshness(ours_port, args, f"f{publish_ms}")))
            stop(worker)
            worker = None
    finally:
        for proc in (ours, naive, worker):
            if proc is not None:
                stop(proc)
        import redis

        r = redis.Redis.from_url(args.redis)
        keys = list(r.scan_iter(match=f"{prefix}:*", count=1000))
        for i in range(0, len(keys), 500):
            r.delete(*keys[i : i + 500])
        r.close()

    print(
        f"\nHTTP benchmark — {os.cpu_count()} cores, one uvicorn process per app, Redis {args.redis}"
    )
    print(
        f"{args.conns} connections for single requests, 4 for batches of 1,000; {args.seconds:g} s or fewer per scenario\n"
    )
    print(
        "| scenario         | app          | rate         | p50 ms   | p99 ms   | n       | non-2xx |"
    )
    print("|---|---|---:|---:|---:|---:|---|")
    for scen, unit, label in (
        ("single POST", 1, "req/s"),
        ("single predict", 1, "req/s"),
        ("batch ingest", 1000, "examples/s"),
        ("batch predict", 1000, "examples/s"),
    ):
        for app in ("naive", "streamlearn"):
            r = results[app][scen]
            line = row(scen, r, unit).split("|")
            print(
                "|"
                + line[1]
                + f"| {app:<12} |"
                + f"{line[2].rstrip()} {label} |"
                + "|".join(line[3:])
            )
    print("\n| scenario | streamlearn / naive |")
    print("|---|---:|")
    for scen in ("single POST", "single predict", "batch ingest", "batch predict"):
        ratio = results["streamlearn"][scen].rps / max(1e-9, results["naive"][scen].rps)
        print(f"| {scen} (throughput) | {ratio:.1f}x |")
    print("\nFreshness: 202 → first prediction from a version covering the example (one worker)")
    print(
        "| worker publish_ms | ingest examples/s | p50 ms | p99 ms | API share p50 / p99 ms | probes |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for publish_ms, delays, share, rate in fresh:
        if not delays:
            print(f"| {publish_ms} | {rate:,.0f} | - | - | - | 0 |")
            continue
        ms = sorted(d * 1000 for d in delays)
        sh = sorted(d * 1000 for d in share)
        share_s = f"{statistics.median(sh):.0f} / {pct(sh, 0.99):.0f}" if sh else "-"
        print(
            f"| {publish_ms} | {rate:,.0f} | {statistics.median(ms):.0f} | {pct(ms, 0.99):.0f} | "
            f"{share_s} | {len(ms)} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", nargs="?", default="bench", choices=["bench", "naive-server"])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--prefix", default="bench-http")
    parser.add_argument("--conns", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=9.0, help="per scenario and app")
    parser.add_argument("--rounds", type=int, default=3, help="alternating slices per scenario")
    parser.add_argument("--max-requests", type=int, default=40_000)
    parser.add_argument("--max-batches", type=int, default=400)
    parser.add_argument("--fresh-rate", type=float, default=50_000.0)
    parser.add_argument("--fresh-seconds", type=float, default=12.0)
    parser.add_argument(
        "--publish-ms", type=int, nargs="+", default=[250, 100], help="worker publish intervals"
    )
    parser.add_argument("--quick", action="store_true", help="short scenarios")
    args = parser.parse_args()
    if args.mode == "naive-server":
        import uvicorn

        uvicorn.run(
            naive_app(args.redis, args.prefix),
            host="127.0.0.1",
            port=args.port,
            log_level="warning",
            access_log=False,
            loop="uvloop",
            http="httptools",
        )
        return
    if args.quick:
        args.seconds, args.max_requests, args.max_batches, args.fresh_seconds = 3.0, 5_000, 60, 6.0
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
