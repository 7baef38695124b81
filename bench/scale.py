"""Scale-out benchmark: API processes and workers over many models on a local Redis Cluster.

Starts a private 3-master Redis Cluster on loopback (the same helper as the cluster tests,
``tests/redis_servers.py``; append-only file fsynced every second, as in production), then for
each *shape* (API processes × worker processes, e.g. ``1x1,1x2,2x3``):

1. starts the API processes (``python -m service.cli api``) and workers
   (``python -m service.cli worker``), all in cluster mode under a fresh key prefix;
2. creates ``--models`` binary text models (short synthetic messages from
   ``bench/textgen.py``, hashed word unigrams, ``pa1``) spread over the three masters, and
   warms each one up with one batch posted with ``?wait=`` (so every worker has compiled and
   holds its leases before anything is timed);
3. **throughput** (``--seconds``): ``--conns`` connections per API process post batches of
   ``--batch`` examples round-robin over the models, as fast as answers come back. Reported:
   examples/s *ingested* (accepted by the API), examples/s *learned* (the rise of the models'
   ``examples_seen`` over the same window), the backlog left at the end, and the CPU each kind
   of process spent per example ingested (from ``/proc``: API, worker, Redis, and this load
   generator);
4. **freshness** (``--fresh-seconds``): a paced background load at ``--fresh-share`` of the
   shape's learned rate, while probes post one example to a random model with ``?wait=10``:
   the time from sending the probe until the answer says a version covering it is served in
   that API process (an upper bound on "ingest answer → served"; the probe's own ingest is
   ~1 ms of it). p50 and p99.

Everything is bounded in time and in count, on loopback only; every process and the cluster
are torn down at the end, whatever happened. On a small machine it shows the shape of the
curve, not its height: every process shares the same cores (the load average is printed).

    python3 bench/scale.py                          # 1x1,1x2,1x3,2x2,2x3, ~2.5 minutes
    python3 bench/scale.py --shapes 1x1,2x2 --seconds 8
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
import random
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.textgen import SpamStream
from tests.redis_servers import RedisCluster

TICK = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------------------------
# A lean HTTP/1.1 client (keep-alive, one request in flight per connection)


class Conn:
    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> Conn:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        assert self.reader is not None and self.writer is not None
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        status = int((await self.reader.readline()).split(b" ", 2)[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return status, (await self.reader.readexactly(length) if length else b"")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def wait_healthy(port: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            c = await Conn(port).open()
            status, _ = await c.request("GET", "/healthz")
            c.close()
            if status == 200:
                return
        except OSError:
            pass
        await asyncio.sleep(0.2)
    raise RuntimeError(f"API on port {port} did not come up")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


# --------------------------------------------------------------------------------------------
# Processes


@dataclass
class Shape:
    apis: int
    workers: int

    @property
    def name(self) -> str:
        return f"{self.apis}x{self.workers}"


@dataclass
class Procs:
    apis: list[subprocess.Popen[bytes]] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def all(self) -> list[subprocess.Popen[bytes]]:
        return self.apis + self.workers

    def stop(self) -> None:
        for p in self.all():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.all():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


def start(shape: Shape, env: dict[str, str], logdir: Path) -> Procs:
    procs = Procs()
    full = {**os.environ, **env}
    for i in range(shape.apis):
        port = free_port()
        cmd = [sys.executable, "-m", "service.cli", "api", "--port", str(port)]
        log = (logdir / f"api{i}.log").open("wb")
        procs.apis.append(
            subprocess.Popen(
                [*cmd, "--log-level", "warning"], env=full, cwd=ROOT, stdout=log, stderr=log
            )
        )
        procs.ports.append(port)
    for i in range(shape.workers):
        cmd = [sys.executable, "-m", "service.cli", "worker", "--worker-id", f"w{i}"]
        log = (logdir / f"worker{i}.log").open("wb")
        procs.workers.append(
            subprocess.Popen(
                [*cmd, "--log-level", "WARNING"], env=full, cwd=ROOT, stdout=log, stderr=log
            )
        )
    return procs


# --------------------------------------------------------------------------------------------
# Load


def bodies(batch: int, count: int, seed: int) -> list[bytes]:
    """``count`` request bodies of ``batch`` short labelled messages each (no ids)."""
    it = SpamStream(seed=seed).examples(batch * count)
    out = []
    for _ in range(count):
        rows = [{"text": e["text"], "label": e["label"]} for e in itertools.islice(it, batch)]
        out.append(orjson.dumps({"examples": rows}))
    return out


async def snapshot(port: int, models: list[str]) -> tuple[int, int, int]:
    """Sums of ``examples_seen``, ``lag`` and head ``version`` over the models (in turn)."""
    c = await Conn(port).open()
    seen = lag = versions = 0
    for m in models:
        status, data = await c.request("GET", f"/models/{m}/metrics")
        if status != 200:
            raise RuntimeError(f"metrics of {m}: {status} {data[:200]!r}")
        doc = orjson.loads(data)
        seen += int(doc["examples_seen"])
        lag += int(doc.get("lag") or 0)
        versions += int(doc.get("version") or 0)
    c.close()
    return seen, lag, versions


@dataclass
class Result:
    shape: Shape
    ingest: float = 0.0
    learn: float = 0.0
    backlog: int = 0
    versions: float = 0.0  # versions published per second, all models
    statuses: dict[int, int] = field(default_factory=dict)
    cpu_us: dict[str, float] = field(default_factory=dict)  # CPU µs per example ingested
    fresh: list[float] = field(default_factory=list)
    fresh_rate: float = 0.0
    timeouts: int = 0
    redis_mb: float = 0.0


async def throughput(
    procs: Procs,
    models: list[str],
    payloads: list[bytes],
    batch: int,
    args: argparse.Namespace,
    redis_pids: list[int],
    res: Result,
) -> None:
    conns = [await Conn(port).open() for port in procs.ports for _ in range(args.conns)]
    accepted = 0
    cpu_pids = {
        "api": [p.pid for p in procs.apis],
        "worker": [p.pid for p in procs.workers],
        "redis": redis_pids,
        "client": [os.getpid()],
    }
    seen0, _, v0 = await snapshot(procs.ports[0], models)
    cpu0 = {k: sum(cpu_seconds(p) for p in pids) for k, pids in cpu_pids.items()}
    t0 = time.perf_counter()
    end = t0 + args.seconds
    counter = iter(range(10**12))

    async def run(c: Conn) -> None:
        nonlocal accepted
        while time.perf_counter() < end:
            i = next(counter)
            if i >= args.max_requests:
                return
            status, _ = await c.request(
                "POST", f"/models/{models[i % len(models)]}/examples", payloads[i % len(payloads)]
            )
            res.statuses[status] = res.statuses.get(status, 0) + 1
            if status == 202:
                accepted += batch

    await asyncio.gather(*(run(c) for c in conns))
    elapsed = time.perf_counter() - t0
    cpu1 = {k: sum(cpu_seconds(p) for p in pids) for k, pids in cpu_pids.items()}
    seen1, lag, v1 = await snapshot(procs.ports[0], models)
    elapsed_seen = time.perf_counter() - t0
    for c in conns:
        c.close()
    res.ingest = accepted / elapsed
    res.learn = (seen1 - seen0) / elapsed_seen
    res.backlog = lag
    res.versions = (v1 - v0) / elapsed_seen
    res.cpu_us = {k: (cpu1[k] - cpu0[k]) / max(accepted, 1) * 1e6 for k in cpu_pids}


async def drain(port: int, models: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (await snapshot(port, models))[1] == 0:
            return
        await asyncio.sleep(0.5)


async def freshness(
    procs: Procs, models: list[str], payloads: list[bytes], batch: int, args: argparse.Namespace,
    res: Result,
) -> None:  # fmt: skip
    rate = max(1000.0, args.fresh_share * min(res.ingest, res.learn))
    res.fresh_rate = rate
    stop_at = time.perf_counter() + args.fresh_seconds
    rng = random.Random(1)
    n_bg = 2 * len(procs.ports)

    async def background(k: int) -> None:
        c = await Conn(procs.ports[k % len(procs.ports)]).open()
        period = batch * n_bg / rate
        nxt = time.perf_counter()
        i = k
        while time.perf_counter() < stop_at:
            await c.request("POST", f"/models/{models[i % len(models)]}/examples", payloads[i % 8])
            i += n_bg
            nxt += period
            await asyncio.sleep(max(0.0, nxt - time.perf_counter()))
        c.close()

    probe_body = orjson.dumps({"text": "probe message free offer call now", "label": "spam"})

    async def probe(k: int) -> None:
        c = await Conn(procs.ports[k % len(procs.ports)]).open()
        await asyncio.sleep(0.3)
        while time.perf_counter() < stop_at - 1.0:
            m = rng.choice(models)
            t = time.perf_counter()
            status, _ = await c.request("POST", f"/models/{m}/examples?wait=10", probe_body)
            if status == 200:
                res.fresh.append(time.perf_counter() - t)
            else:
                res.timeouts += 1
            await asyncio.sleep(0.02)
        c.close()

    await asyncio.gather(
        *(background(k) for k in range(n_bg)),
        *(probe(k) for k in range(args.probes * len(procs.ports))),
    )


def redis_used_mb(cluster: RedisCluster) -> float:
    total = 0
    for node in cluster.nodes:
        for line in node.cli("info", "memory").splitlines():
            if line.startswith("used_memory:"):
                total += int(line.split(":")[1])
    return total / 2**20


async def run_shape(
    shape: Shape, cluster: RedisCluster, args: argparse.Namespace, logdir: Path
) -> Result:
    for node in cluster.nodes:
        node.cli("flushall")
    prefix = f"bench-scale-{uuid.uuid4().hex[:6]}"
    env = {
        "STREAMLEARN_REDIS_URL": cluster.url,
        "STREAMLEARN_REDIS_CLUSTER": "1",
        "STREAMLEARN_KEY_PREFIX": prefix,
        "STREAMLEARN_MAX_LAG": str(10**9),
        "STREAMLEARN_KEEP_VERSIONS": "3",
        "STREAMLEARN_LOG_LEVEL": "WARNING",
    }
    procs = start(shape, env, logdir)
    res = Result(shape)
    try:
        await asyncio.gather(*(wait_healthy(p) for p in procs.ports))
        models = [f"m{i}" for i in range(args.models)]
        spec = orjson.dumps(
            {"algorithm": "pa1", "bits": args.bits, "classes": ["ham", "spam"], "positive": "spam"}
        )
        c = await Conn(procs.ports[0]).open()
        for m in models:
            status, data = await c.request("PUT", f"/models/{m}", spec)
            if status not in (200, 201):
                raise RuntimeError(f"PUT {m}: {status} {data[:300]!r}")
        c.close()
        payloads = bodies(args.batch, 8, seed=7)

        async def warm_up(port: int, m: str) -> None:
            # every model answers a ?wait= through every API process: learned, published and
            # served everywhere, every worker compiled and holding its leases
            c = await Conn(port).open()
            status, data = await c.request("POST", f"/models/{m}/examples?wait=30", payloads[0])
            c.close()
            if status != 200:
                raise RuntimeError(f"warm-up of {m} on port {port}: {status} {data[:300]!r}")

        # One request per API process first, so that its cluster client learns the topology
        # alone: redis-py 8.1's async RedisCluster, hit by ~100 concurrent first commands,
        # sometimes uses a connection another task has just reset (AttributeError, a 500).
        for p in procs.ports:
            await snapshot(p, models[:1])
        gate = asyncio.Semaphore(16)

        async def gated(port: int, m: str) -> None:
            async with gate:
                await warm_up(port, m)

        await asyncio.gather(*(gated(p, m) for p in procs.ports for m in models))
        redis_pids = [n.proc.pid for n in cluster.nodes if n.proc is not None]
        await throughput(procs, models, payloads, args.batch, args, redis_pids, res)
        await drain(procs.ports[0], models, args.drain_seconds)
        await freshness(procs, models, payloads, args.batch, args, res)
        res.redis_mb = redis_used_mb(cluster)
        dead = [p.args for p in procs.all() if p.poll() is not None]
        if dead:
            raise RuntimeError(f"a process died during the run: {dead}; logs in {logdir}")
        return res
    finally:
        procs.stop()


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000.0


def table(results: list[Result], args: argparse.Namespace) -> str:
    head = (
        "| shape (API×workers) | ingested ex/s | learned ex/s | backlog at end | versions/s | "
        "µs CPU/ex: API | worker | Redis | client | freshness p50 / p99 ms (at ex/s) | "
        "Redis MB |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in results:
        bad = {k: v for k, v in r.statuses.items() if k != 202}
        cpu = r.cpu_us
        lines.append(
            f"| {r.shape.name} | {r.ingest:,.0f} | {r.learn:,.0f} | {r.backlog:,}"
            f"{' ' + str(bad) if bad else ''} | {r.versions:.0f} | {cpu['api']:.1f} | {cpu['worker']:.1f} | "
            f"{cpu['redis']:.1f} | {cpu['client']:.1f} | "
            f"{pct(r.fresh, 0.5):.0f} / {pct(r.fresh, 0.99):.0f} ({r.fresh_rate:,.0f}; "
            f"n={len(r.fresh)}{', timeouts=' + str(r.timeouts) if r.timeouts else ''}) | "
            f"{r.redis_mb:.0f} |"
        )
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> int:
    shapes = [Shape(*map(int, s.split("x"))) for s in args.shapes.split(",")]
    logdir = Path(args.logdir or f"/tmp/bench-scale-{uuid.uuid4().hex[:6]}")
    logdir.mkdir(parents=True, exist_ok=True)
    results = []
    node_args = ["--appendonly", "yes", "--appendfsync", "everysec"]
    with RedisCluster(masters=3, node_args=node_args) as cluster:
        for shape in shapes:
            r = await run_shape(shape, cluster, args, logdir)
            results.append(r)
            print(
                f"{shape.name}: ingest {r.ingest:,.0f} ex/s, learn {r.learn:,.0f} ex/s, "
                f"freshness p50 {pct(r.fresh, 0.5):.0f} ms",
                file=sys.stderr,
                flush=True,
            )
    print(
        f"\n{args.models} binary text models (pa1, 2**{args.bits} buckets, hashed word "
        f"unigrams), batches of {args.batch}, {args.conns} connections per API process, "
        f"{args.seconds:g} s per shape; 3-master Redis Cluster on loopback; "
        f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n"
    )
    print(table(results, args))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--shapes", default="1x1,1x2,1x3,2x2,2x3", help="APIxWORKERS, comma-separated")
    p.add_argument("--models", type=int, default=64)
    p.add_argument("--bits", type=int, default=16, help="hash buckets per model: 2**bits")
    p.add_argument("--batch", type=int, default=200, help="examples per request")
    p.add_argument("--conns", type=int, default=4, help="connections per API process")
    p.add_argument("--seconds", type=float, default=12.0, help="throughput window per shape")
    p.add_argument("--max-requests", type=int, default=20_000, help="cap per shape")
    p.add_argument("--drain-seconds", type=float, default=20.0, help="wait for the backlog")
    p.add_argument("--fresh-seconds", type=float, default=6.0)
    p.add_argument("--probes", type=int, default=3, help="probe connections per API process")
    p.add_argument("--fresh-share", type=float, default=0.5, help="of the learned rate")
    p.add_argument("--logdir", help="process logs (default: a fresh /tmp directory)")
    args = p.parse_args(argv)
    if args.models < 1 or args.seconds <= 0:
        p.error("--models and --seconds must be positive")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
