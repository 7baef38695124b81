"""Load with many models: false 503s, latency, ``GET /metrics`` and API memory, side by side.

One API process (``streamlearn api``, uvicorn as shipped) and one worker run against the real
Redis (``--redis``) under a fresh key prefix (deleted at the end). ``--models`` models are
created, then ``--conns`` keep-alive connections each post single examples and single
predictions (half and half) to models drawn at random for ``--seconds``, while one more
connection scrapes ``GET /metrics`` every ``--scrape-every`` seconds. Reported per variant:
requests/s, every non-2xx by status, p50/p99, the ``/metrics`` answers and their latency,
the API process's resident memory at the end, and how many lines it logged meanwhile.
Then the idle phase: an API process holding every model in memory, with no worker and no
requests, and its CPU use over ``--idle-seconds`` (the cost of its periodic cache check).

Variants, each in one run on the same machine:

* ``baseline`` — only with ``--baseline-src DIR``: the API and worker run from another
  source tree (e.g. the main branch before this change), same settings;
* ``ours`` — this tree, default settings;
* ``ours, cache 32 MiB`` — this tree with ``STREAMLEARN_MODEL_CACHE_BYTES`` = 32 MiB: the
  model cache evicts the least recently used models, bounding the API's memory.

Run from the repository root::

    python3 bench/load.py                                  # ~3 minutes
    python3 bench/load.py --baseline-src ../main           # side by side with another tree
    python3 bench/load.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
N_FEATURES = 20


# --------------------------------------------------------------------------------------------
# A lean HTTP/1.1 client (one request in flight per connection, keep-alive)


class Conn:
    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> Conn:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        if self.writer is None:
            await self.open()
        assert self.reader is not None and self.writer is not None
        self.writer.write(
            f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        status = int((await self.reader.readline()).split(b" ", 2)[1])
        length, close = 0, False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            low = line.lower()
            if low.startswith(b"content-length:"):
                length = int(line[15:])
            elif low.startswith(b"connection:") and b"close" in low:
                close = True
        data = await self.reader.readexactly(length) if length else b""
        if close:
            self.close()
        return status, data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


# --------------------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    errors: int = 0  # connection-level failures (no HTTP answer)
    scrape_ms: list[float] = field(default_factory=list)
    scrape_statuses: dict[int, int] = field(default_factory=dict)
    rss_mb: float = 0.0
    log_lines: int = 0  # lines the API logged during the load

    def pct(self, xs: list[float], q: float) -> float:
        if not xs:
            return float("nan")
        s = sorted(xs)
        return s[min(len(s) - 1, int(q * len(s)))]


def example(rng: random.Random, label: bool) -> bytes:
    feats = {f"f{rng.randrange(5000)}": 1.0 for _ in range(N_FEATURES)}
    ex: dict[str, Any] = {"features": feats}
    if label:
        ex["label"] = rng.choice((-1, 1))
    return orjson.dumps(ex)


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def start(src: Path, args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A process of ``src`` (its output, the logs, go to ``log``: a pipe nobody reads would
    fill up and block the process)."""
    full = {**os.environ, **env, "PYTHONPATH": str(src)}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, *args], cwd=src, env=full, stdout=out, stderr=subprocess.STDOUT
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_healthy(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            c = await Conn(port).open()
            status, _ = await c.request("GET", "/healthz")
            c.close()
            if status == 200:
                return
        except (OSError, IndexError):
            pass
        await asyncio.sleep(0.2)
    raise RuntimeError(f"API on port {port} did not come up")


async def create_models(port: int, n: int) -> None:
    spec = orjson.dumps({"algorithm": "pa1", "bits": 14})
    names = iter(range(n))

    async def one() -> None:
        c = await Conn(port).open()
        for i in names:
            status, data = await c.request("PUT", f"/models/m{i}", spec)
            assert status in (200, 201), data
        c.close()

    await asyncio.gather(*(one() for _ in range(16)))


async def run_variant(
    name: str, src: Path, args: argparse.Namespace, extra_env: dict[str, str]
) -> Result:
    prefix = f"bench-load-{uuid.uuid4().hex[:8]}"
    env = {
        "STREAMLEARN_REDIS_URL": args.redis,
        "STREAMLEARN_KEY_PREFIX": prefix,
        "STREAMLEARN_MAX_LAG": str(10**9),
        **extra_env,
    }
    port = free_port()
    logs = Path(tempfile.mkdtemp(prefix="bench-load-"))
    api = start(
        src,
        ["-m", "service.cli", "api", "--port", str(port), "--log-level", "warning"],
        env,
        logs / "api.log",
    )
    worker: subprocess.Popen[bytes] | None = None
    res = Result(name)
    try:
        await wait_healthy(port)
        await create_models(port, args.models)
        worker = start(src, ["-m", "workers"], env, logs / "worker.log")
        before = len((logs / "api.log").read_bytes().splitlines())
        stop_at = time.perf_counter() + args.seconds

        async def client(k: int) -> None:
            c = Conn(port)
            r = random.Random(k)
            while time.perf_counter() < stop_at:
                m = f"m{r.randrange(args.models)}"
                ingest = r.random() < 0.5
                path = f"/models/{m}/examples" if ingest else f"/models/{m}/predict"
                t = time.perf_counter()
                try:
                    status, _ = await c.request("POST", path, example(r, ingest))
                except (OSError, IndexError, asyncio.IncompleteReadError):
                    res.errors += 1
                    c.close()
                    continue
                res.latencies.append(time.perf_counter() - t)
                res.statuses[status] = res.statuses.get(status, 0) + 1

        async def scraper() -> None:
            c = Conn(port)
            while time.perf_counter() < stop_at:
                t = time.perf_counter()
                try:
                    status, _ = await c.request("GET", "/metrics")
                except (OSError, IndexError, asyncio.IncompleteReadError):
                    status = 0
                    c.close()
                res.scrape_ms.append((time.perf_counter() - t) * 1000)
                res.scrape_statuses[status] = res.scrape_statuses.get(status, 0) + 1
                await asyncio.sleep(args.scrape_every)

        t0 = time.perf_counter()
        await asyncio.gather(scraper(), *(client(k) for k in range(args.conns)))
        res.seconds = time.perf_counter() - t0
        res.rss_mb = rss_mb(api.pid)
        res.log_lines = len((logs / "api.log").read_bytes().splitlines()) - before
    finally:
        if worker is not None:
            stop(worker)
        stop(api)
        cleanup(args.redis, prefix)
        shutil.rmtree(logs, ignore_errors=True)
    return res


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def idle_cpu(src: Path, args: argparse.Namespace) -> float:
    """CPU % of an API process holding ``--models`` models in memory and doing nothing else
    (no worker, no requests) over ``--idle-seconds``: the cost of its periodic cache check."""
    prefix = f"bench-load-{uuid.uuid4().hex[:8]}"
    env = {"STREAMLEARN_REDIS_URL": args.redis, "STREAMLEARN_KEY_PREFIX": prefix}
    port = free_port()
    logs = Path(tempfile.mkdtemp(prefix="bench-load-"))
    api = start(
        src,
        ["-m", "service.cli", "api", "--port", str(port), "--log-level", "warning"],
        env,
        logs / "api.log",
    )
    try:
        await wait_healthy(port)
        await create_models(port, args.models)
        body = orjson.dumps({"features": {"f1": 1.0}})
        names = iter(range(args.models))

        async def touch() -> None:
            c = await Conn(port).open()
            for i in names:
                status, data = await c.request("POST", f"/models/m{i}/predict", body)
                assert status == 200, data
            c.close()

        await asyncio.gather(*(touch() for _ in range(16)))
        await asyncio.sleep(3.0)
        t, cpu = time.monotonic(), cpu_seconds(api.pid)
        await asyncio.sleep(args.idle_seconds)
        return 100.0 * (cpu_seconds(api.pid) - cpu) / (time.monotonic() - t)
    finally:
        stop(api)
        cleanup(args.redis, prefix)
        shutil.rmtree(logs, ignore_errors=True)


def cleanup(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=5000))
        for i in range(0, len(keys), 1000):
            client.delete(*keys[i : i + 1000])
    finally:
        client.close()


def report(results: list[Result], args: argparse.Namespace) -> None:
    print(
        f"\n{args.models} models, {args.conns} connections, {args.seconds:g} s, "
        f"/metrics every {args.scrape_every:g} s\n"
    )
    head = (
        "| variant | requests | req/s | non-2xx | p50 ms | p99 ms | /metrics answers | "
        "/metrics p50 / max ms | API RSS MB | API log lines |"
    )
    print(head)
    print("|" + "---|" * 10)
    for r in results:
        n = len(r.latencies)
        bad = {s: c for s, c in sorted(r.statuses.items()) if not 200 <= s < 300}
        bad_txt = ", ".join(f"{c} × {s}" for s, c in bad.items()) or "0"
        if r.errors:
            bad_txt += f", {r.errors} conn errors"
        scr = ", ".join(f"{c} × {s}" for s, c in sorted(r.scrape_statuses.items()))
        print(
            f"| {r.name} | {n} | {n / r.seconds:,.0f} | {bad_txt} | "
            f"{r.pct(r.latencies, 0.5) * 1000:.1f} | {r.pct(r.latencies, 0.99) * 1000:.1f} | "
            f"{scr} | {r.pct(r.scrape_ms, 0.5):.0f} / {max(r.scrape_ms or [0]):.0f} | "
            f"{r.rss_mb:.0f} | {r.log_lines} |"
        )


async def main_async(args: argparse.Namespace) -> None:
    variants: list[tuple[str, Path, dict[str, str]]] = []
    if args.baseline_src:
        variants.append(("baseline", Path(args.baseline_src).resolve(), {}))
    variants.append(("ours", ROOT, {}))
    variants.append(
        ("ours, cache 32 MiB", ROOT, {"STREAMLEARN_MODEL_CACHE_BYTES": str(32 * 1024 * 1024)})
    )
    results = []
    for name, src, env in variants:
        print(f"running {name} ({src}) …", file=sys.stderr)
        results.append(await run_variant(name, src, args, env))
    report(results, args)
    if args.idle_seconds > 0:
        print(f"\nidle API CPU with {args.models} models in memory, {args.idle_seconds:g} s\n")
        print("| variant | API CPU % |\n|---|---|")
        for name, src, _ in variants[:2]:  # baseline (if any) and ours
            print(f"| {name} | {await idle_cpu(src, args):.1f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    p.add_argument("--models", type=int, default=2000)
    p.add_argument("--conns", type=int, default=256)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--scrape-every", type=float, default=1.0)
    p.add_argument("--idle-seconds", type=float, default=20.0, help="0: skip the idle phase")
    p.add_argument("--baseline-src", default=None, help="another source tree to compare with")
    p.add_argument("--quick", action="store_true", help="200 models, 64 connections, 8 s")
    args = p.parse_args()
    if args.quick:
        args.models, args.conns, args.seconds = 200, 64, 8.0
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
