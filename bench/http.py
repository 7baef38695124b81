"""HTTP benchmark: the streamlearn API beside a naive FastAPI app and bare ASGI apps, one run.

Every app runs as its own server subprocess on loopback, against the same real Redis
(``--redis``, default 127.0.0.1:6379) under a fresh key prefix that is deleted at the end:

* ``naive``: what one writes first (uvicorn): a pydantic model per example, one ``XADD`` of the
  JSON per request, and a prediction that reads the weights from Redis and hashes the
  features per request;
* ``bare``: a pure ASGI app (uvicorn, the options we ship) that parses the body with orjson
  and answers a constant: the ceiling of any app on this server, this machine;
* ``bare-granian``: the same app under granian (``pip install granian``: not a dependency;
  the granian apps are left out when it is missing);
* ``streamlearn``: our API as shipped (``streamlearn api``, uvicorn with uvloop and httptools);
* ``streamlearn-granian``: the same app under granian (one process, uvloop);
* ``baseline``: with ``--baseline DIR``, the API of another checkout (say, ``git worktree add
  /tmp/base main``) under uvicorn, for before/after figures in one run.

Scenarios (each bounded in requests and in seconds; the apps take turns in ``--rounds``
alternating slices, so a change in the machine's load hits them alike):

* single-example POST at ``--conns`` connections: req/s, p50, p99;
* single-example predict at ``--conns`` connections: req/s, p50, p99;
* batch ingest, 1,000 examples of 20 named features per request: examples/s;
* text batch ingest, 1,000 short texts (SMS-sized) per request: examples/s;
* batch predict, 1,000 examples per request: examples/s;
* freshness (streamlearn only, with one worker process learning; ``--fresh``): while a
  background task ingests batches at ``--fresh-rate`` examples/s, probes are posted one at a
  time and, from each probe's 202, predictions are polled until the version they report covers
  it (its ``examples_seen`` reaches the probe's position in the stream): p50 and p99 of that
  delay.

Besides rates and latencies, each row gives the server's CPU time per request (user + system
of the server process and its children, from ``/proc``): on a shared machine it is the
steadier figure, and ``1 / cpu`` is what one server process can do on a core of its own.

The load generator is a small asyncio HTTP/1.1 client over raw streams (keep-alive, one
request in flight per connection), several times cheaper per request than httpx, so that on
a small machine it measures the servers more than itself (it still shares the cores). Run
from the repository root::

    python3 bench/http.py                       # the full run
    python3 bench/http.py --quick               # a quick look
    python3 bench/http.py --apps bare streamlearn streamlearn-granian --baseline /tmp/base
    python3 bench/http.py --json out.json       # the figures, for medians over runs
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


def bare_app() -> Any:
    """A pure ASGI app: reads the body, parses it with orjson, answers a constant (202 for
    examples, 200 with one answer per example for predict, 200 for anything else)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        chunks = []
        more = True
        while more:
            msg = await receive()
            chunks.append(msg.get("body", b""))
            more = msg.get("more_body", False)
        raw = b"".join(chunks)
        status, out = 200, b'{"status":"ok"}'
        if scope["method"] == "POST":
            doc = orjson.loads(raw)
            n = len(doc["examples"]) if "examples" in doc else 1
            if scope["path"].endswith("/examples"):
                status, out = 202, orjson.dumps({"accepted": n, "duplicates": 0})
            else:
                one = {"label": 1, "score": 0.5, "margin": 0.0, "version": 0}
                out = orjson.dumps(one if n == 1 else {"predictions": [one] * n})
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(out)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": out})

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
    cpu: float = 0.0  # the server's CPU seconds (user + system) over the timed part

    @property
    def cpu_ms(self) -> float:
        """Server CPU milliseconds per request."""
        return self.cpu / self.requests * 1000.0 if self.requests else float("nan")

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
    pid: int | None = None,
) -> LoadResult:
    """``conns`` connections, each with one request in flight, until time or count runs out;
    with ``pid``, the CPU time that server process (and its children) spent meanwhile."""
    pool = [await Conn("127.0.0.1", port).open() for _ in range(conns)]
    for i in range(min(warmup, max_requests)):  # warm caches and connections, untimed
        await pool[i % conns].request(*make(i))
    res = LoadResult()
    cpu0 = cpu_seconds(pid) if pid else 0.0
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
    if pid:
        res.cpu = cpu_seconds(pid) - cpu0
    for c in pool:
        c.close()
    return res


# --------------------------------------------------------------------------------------------
# Servers

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()  # fields from the state on (index 0 = field 3)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and of its live descendants (uvicorn's and
    granian's worker processes), from /proc (0 where there is no /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                parents.setdefault(int(st[1]), []).append(int(entry.name))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        st = _stat(p)
        if st is not None:
            total += int(st[11]) + int(st[12])  # utime, stime
        todo.extend(parents.get(p, []))
    return total / TICK


def start(cmd: list[str], env: dict[str, str], cwd: Path = ROOT) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cmd, env={**os.environ, **env}, cwd=cwd, stdout=subprocess.DEVNULL)


async def wait_healthy(port: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            c = await Conn("127.0.0.1", port).open()
            status, _ = await c.request("GET", "/healthz")
            c.close()
            if status == 200:
                return
        except (OSError, ValueError, IndexError, asyncio.IncompleteReadError):
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


def granian(target: str, port: int, *, factory: bool) -> list[str]:
    """granian serving ``target`` (an ASGI app, or a factory of one) in one process."""
    cmd = [sys.executable, "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--workers", "1", "--loop", "uvloop"]
    cmd += ["--log-level", "warning", "--no-access-log"]
    return [*cmd, *(["--factory"] if factory else []), target]


def app_command(name: str, port: int, args: argparse.Namespace) -> tuple[list[str], Path]:
    """The command line (and working directory) that serves app ``name`` on ``port``."""
    here = [sys.executable, __file__]
    ours = [sys.executable, "-m", "service.cli", "api", "--port", str(port)]
    ours += ["--log-level", "warning"]
    if name == "naive":
        cmd = [*here, "naive-server", "--port", str(port), "--redis", args.redis]
        return [*cmd, "--prefix", args.prefix], ROOT
    if name == "bare":
        return [*here, "bare-server", "--port", str(port)], ROOT
    if name == "bare-granian":
        return granian("bench.http:bare_asgi", port, factory=False), ROOT
    if name == "streamlearn":
        return ours, ROOT
    if name == "streamlearn-granian":
        return granian("service.api.app:create_app_from_env", port, factory=True), ROOT
    if name == "baseline":
        return ours, Path(args.baseline).resolve()
    raise ValueError(f"unknown app {name!r}")


# --------------------------------------------------------------------------------------------
# Scenarios

_TEXT = (
    "the you to and is for are call now free your have txt win claim prize reply stop please "
    "send mobile week just will get can ok love home later sorry lunch meeting see tomorrow "
    "tonight cash won urgent offer service café déjà 😀 £100 http://bit.ly/x1 T&C's 16+"
)
TEXT_WORDS = _TEXT.split()


def text_example(i: int) -> dict[str, Any]:
    """A short SMS-sized text (4 to 27 words), labelled by a rule."""
    k = 4 + (i * 7) % 24
    words = [TEXT_WORDS[(i * 31 + j * 17) % len(TEXT_WORDS)] for j in range(k)]
    return {"text": " ".join(words)[:160], "label": "spam" if i % 3 == 0 else "ham"}


def single_post(i: int) -> tuple[str, str, bytes, str]:
    return ("POST", "/models/b/examples", orjson.dumps(example(i)), "application/json")


def single_predict(i: int) -> tuple[str, str, bytes, str]:
    return ("POST", "/models/b/predict", orjson.dumps(example(i, label=False)), "application/json")


def batches(size: int, label: bool) -> list[bytes]:
    return [
        orjson.dumps({"examples": [example(j * size + i, label=label) for i in range(size)]})
        for j in range(8)
    ]


def text_batches(size: int) -> list[bytes]:
    return [
        orjson.dumps({"examples": [text_example(j * size + i) for i in range(size)]})
        for j in range(8)
    ]


def merge(parts: list[LoadResult]) -> LoadResult:
    out = LoadResult()
    for r in parts:
        out.requests += r.requests
        out.seconds += r.seconds
        out.latencies += r.latencies
        out.cpu += r.cpu
        for k, v in r.statuses.items():
            out.statuses[k] = out.statuses.get(k, 0) + v
    return out


SCENARIOS = (  # name, unit (examples per request), what the rate counts
    ("single POST", 1, "req/s"),
    ("single predict", 1, "req/s"),
    ("batch ingest", 1000, "examples/s"),
    ("text batch ingest", 1000, "examples/s"),
    ("batch predict", 1000, "examples/s"),
)


async def scenarios(
    apps: dict[str, tuple[int, int]], args: argparse.Namespace
) -> dict[str, dict[str, LoadResult]]:
    """Each scenario runs the apps (name → (port, pid)) in alternating slices (``--rounds``),
    so that a change in the machine's load hits them alike."""
    post_batches = batches(1000, True)
    pred_batches = batches(1000, False)
    texts = text_batches(1000)
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
            "text batch ingest",
            lambda i: ("POST", "/models/t/examples", texts[i % 8], "application/json"),
            batch,
        ),
        (
            "batch predict",
            lambda i: ("POST", "/models/b/predict", pred_batches[i % 8], "application/json"),
            batch,
        ),
    ]
    wanted = set(args.scenarios or [name for name, _, _ in SCENARIOS])
    parts: dict[str, dict[str, list[LoadResult]]] = {name: {} for name in apps}
    for scenario, make, kw in plan:
        if scenario not in wanted:
            continue
        for _ in range(args.rounds):
            for name, (port, pid) in apps.items():
                if name == "naive" and scenario == "text batch ingest":
                    continue  # the naive app has no text featurizer
                r = await load(port, make, seconds=args.seconds / args.rounds, pid=pid, **kw)
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


OURS = ("streamlearn", "streamlearn-granian", "baseline")
SPEC_B = {"algorithm": "pa1", "bits": BITS}
SPEC_T = {"algorithm": "pa1", "bits": BITS, "classes": ["ham", "spam"], "text": {}}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    prefix = args.prefix = f"bench-http-{uuid.uuid4().hex[:8]}"
    env = {
        "STREAMLEARN_REDIS_URL": args.redis,
        "STREAMLEARN_KEY_PREFIX": prefix,
        "STREAMLEARN_MAX_LAG": str(10**9),
    }
    names = list(args.apps)
    if args.baseline and "baseline" not in names:
        names.append("baseline")
    procs: dict[str, subprocess.Popen[bytes]] = {}
    ports: dict[str, int] = {}
    worker: subprocess.Popen[bytes] | None = None
    fresh = []
    try:
        for name in names:
            ports[name] = free_port()
            cmd, cwd = app_command(name, ports[name], args)
            procs[name] = start(cmd, env, cwd)
        await asyncio.gather(*(wait_healthy(port) for port in ports.values()))
        for name in names:  # each of ours creates the models (the same spec: a no-op after one)
            if name in OURS:
                c = await Conn("127.0.0.1", ports[name]).open()
                models = [("b", SPEC_B), ("t", SPEC_T)]
                models += [(f"f{ms}", SPEC_B) for ms in args.publish_ms if args.fresh]
                for m, spec in models:
                    status, data = await c.request("PUT", f"/models/{m}", orjson.dumps(spec))
                    assert status in (200, 201), data
                c.close()

        apps = {name: (ports[name], procs[name].pid) for name in names}
        results = await scenarios(apps, args)

        ours = next((n for n in names if n in OURS), None)
        for publish_ms in args.publish_ms if args.fresh and ours else []:
            worker = start(
                [sys.executable, "-m", "workers"],
                {**env, "STREAMLEARN_PUBLISH_MS": str(publish_ms)},
            )
            await asyncio.sleep(3.0)  # let it take the leases (and compile) before measuring
            fresh.append((publish_ms, *await freshness(ports[ours], args, f"f{publish_ms}")))
            stop(worker)
            worker = None
    finally:
        for proc in [*procs.values(), worker]:
            if proc is not None:
                stop(proc)
        import redis

        r = redis.Redis.from_url(args.redis)
        keys = list(r.scan_iter(match=f"{prefix}:*", count=1000))
        for i in range(0, len(keys), 500):
            r.delete(*keys[i : i + 500])
        r.close()

    print(
        f"\nHTTP benchmark — {os.cpu_count()} cores, one server process per app, Redis {args.redis}"
    )
    print(
        f"{args.conns} connections for single requests, 4 for batches of 1,000; "
        f"{args.seconds:g} s or fewer per scenario and app, in {args.rounds} alternating slices\n"
    )
    print("| scenario | app | rate | p50 ms | p99 ms | server CPU ms/request | n | non-2xx |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    figures: dict[str, Any] = {}
    for scen, unit, label in SCENARIOS:
        for app in names:
            r = results[app].get(scen)
            if r is None:
                continue
            bad = {s: n for s, n in r.statuses.items() if s >= 300}
            print(
                f"| {scen} | {app} | {r.rps * unit:,.0f} {label} | {r.pct(0.5):.1f} | "
                f"{r.pct(0.99):.1f} | {r.cpu_ms:.2f} | {r.requests} | {bad or '-'} |"
            )
            figures.setdefault(scen, {})[app] = {
                "rate": r.rps * unit,
                "p50_ms": r.pct(0.5),
                "p99_ms": r.pct(0.99),
                "cpu_ms": r.cpu_ms,
                "n": r.requests,
                "non_2xx": sum(bad.values()),
            }
    if fresh:
        print(
            "\nFreshness: 202 → first prediction from a version covering the example (one worker)"
        )
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
        figures.setdefault("freshness", {})[publish_ms] = {
            "p50_ms": statistics.median(ms),
            "p99_ms": pct(ms, 0.99),
            "rate": rate,
        }
    return figures


def bare_asgi(scope: dict[str, Any], receive: Any, send: Any) -> Any:
    """The bare app at module level, for granian (``bench.http:bare_asgi``)."""
    return _BARE(scope, receive, send)


_BARE = bare_app()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "mode", nargs="?", default="bench", choices=["bench", "naive-server", "bare-server"]
    )
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--prefix", default="bench-http")
    parser.add_argument(
        "--apps",
        nargs="+",
        default=["naive", "bare", "bare-granian", "streamlearn", "streamlearn-granian"],
        choices=["naive", "bare", "bare-granian", "streamlearn", "streamlearn-granian"],
    )
    parser.add_argument("--baseline", help="another checkout whose API runs as 'baseline'")
    parser.add_argument("--scenarios", nargs="+", choices=[s for s, _, _ in SCENARIOS])
    parser.add_argument("--conns", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=9.0, help="per scenario and app")
    parser.add_argument("--rounds", type=int, default=3, help="alternating slices per scenario")
    parser.add_argument("--max-requests", type=int, default=40_000)
    parser.add_argument("--max-batches", type=int, default=400)
    parser.add_argument("--fresh", action="store_true", help="also measure freshness")
    parser.add_argument("--fresh-rate", type=float, default=50_000.0)
    parser.add_argument("--fresh-seconds", type=float, default=12.0)
    parser.add_argument(
        "--publish-ms", type=int, nargs="+", default=[250, 100], help="worker publish intervals"
    )
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--quick", action="store_true", help="short scenarios")
    args = parser.parse_args()
    if args.mode in ("naive-server", "bare-server"):
        import uvicorn

        from service.api.server import uvicorn_options

        app = naive_app(args.redis, args.prefix) if args.mode == "naive-server" else _BARE
        uvicorn.run(
            app,
            host="127.0.0.1",
            port=args.port,
            log_level="warning",
            access_log=False,
            **uvicorn_options(),
        )
        return
    if args.quick:
        args.seconds, args.max_requests, args.max_batches, args.fresh_seconds = 3.0, 5_000, 60, 6.0
    import importlib.util

    if importlib.util.find_spec("granian") is None:  # not a dependency: `pip install granian`
        skipped = [a for a in args.apps if a.endswith("-granian")]
        args.apps = [a for a in args.apps if a not in skipped]
        if skipped:
            print(f"granian is not installed: {', '.join(skipped)} left out", file=sys.stderr)
    figures = asyncio.run(main_async(args))
    if args.json:
        Path(args.json).write_text(orjson.dumps(figures, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
