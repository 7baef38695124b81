"""What the service costs Redis: bytes written under mixed load, and memory per model.

Runs a private ``redis-server`` (AOF on, automatic AOF rewrites off so the AOF is exactly
what was written), one API process and one worker process of the source tree ``--src``
(default: this repository), and a spam-preset model (``{"classes": ["ham", "spam"]}``).

``mixed``: ``--ingest-conns`` connections post single SMS-sized texts and
``--predict-conns`` connections ask for predictions, for ``--seconds``. Reported: requests/s
and p50/p99 of each, the HTTP bytes ingested, Redis's ``total_net_input_bytes`` and the AOF
growth — in all and by key kind (parsed from the AOF): the stream, the state and blobs,
versions, kept predictions… — and their ratios to the bytes ingested.

``memory``: ``--messages`` texts are posted in requests of ``--per-request`` (so the worker
publishes many versions on the way), then, once the worker has caught up, ``MEMORY USAGE
key SAMPLES 0`` of every key of the model, summed and by kind.

Texts: ``--texts FILE`` (JSON lines with a ``text`` field, e.g. a tweet collection), cycled;
by default ``bench/textgen.py``'s stream cut to 8–25 words (SMS-sized). Labels alternate
by the text's hash (the bytes do not depend on them). ::

    python3 bench/redis_cost.py mixed --seconds 20
    python3 bench/redis_cost.py memory --messages 5000
    python3 bench/redis_cost.py both --src /path/to/another/checkout   # before/after
    python3 bench/redis_cost.py mixed --prefill 100000   # a mature model (full state ~MBs)

``--prefill N`` teaches the model N texts (``--prefill-texts``, default synthetic) before
the mixed load: a fresh model's full state is small, a mature one's is not, and what a
commit costs must not grow with it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import redis

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "sl"
MODEL = "sms"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- texts -----------------------------------------------------------------------------------


def texts(path: str | None, n: int) -> list[str]:
    out: list[str] = []
    if path:
        lines = [orjson.loads(x)["text"] for x in Path(path).read_bytes().splitlines() if x]
        while len(out) < n:
            out += lines[: n - len(out)]
        return out
    sys.path.insert(0, str(ROOT / "bench"))
    from textgen import SpamStream

    for i, ex in enumerate(SpamStream(seed=1).examples(n)):
        words = ex["text"].split()
        out.append(" ".join(words[: 8 + (i * 7919) % 18]))
    return out


def example(text: str, label: bool = True) -> dict[str, Any]:
    ex: dict[str, Any] = {"text": text}
    if label:
        ex["label"] = "spam" if zlib.crc32(text.encode()) % 2 else "ham"
    return ex


# --- processes -------------------------------------------------------------------------------


class Services:
    """A private Redis (AOF, no automatic rewrite), the API and a worker of ``src``."""

    def __init__(self, src: Path) -> None:
        self.src = src
        self.dir = Path(tempfile.mkdtemp(prefix="sl-redis-cost-"))
        self.redis_port, self.api_port = free_port(), free_port()
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Services:
        self.procs.append(
            subprocess.Popen(
                ["redis-server", "--port", str(self.redis_port), "--dir", str(self.dir),
                 "--appendonly", "yes", "--appendfsync", "no", "--save", "",
                 "--auto-aof-rewrite-percentage", "0"],
                stdout=subprocess.DEVNULL,
            )
        )  # fmt: skip
        self.r = redis.Redis(port=self.redis_port)
        for _ in range(100):
            try:
                self.r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        env = {
            **os.environ,
            "PYTHONPATH": str(self.src),
            "STREAMLEARN_REDIS_URL": f"redis://127.0.0.1:{self.redis_port}/0",
            "STREAMLEARN_KEY_PREFIX": PREFIX,
            "STREAMLEARN_MAX_LAG": str(10**9),
        }
        api = [sys.executable, "-m", "service.cli", "api", "--port", str(self.api_port)]
        self.procs.append(
            subprocess.Popen(
                [*api, "--log-level", "warning"], env=env, cwd=self.src, stdout=subprocess.DEVNULL
            )
        )
        self.procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "workers"], env=env, cwd=self.src, stderr=subprocess.DEVNULL
            )
        )
        return self

    def __exit__(self, *exc: object) -> None:
        for p in reversed(self.procs):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def aof_bytes(self) -> int:
        return sum(f.stat().st_size for f in (self.dir / "appendonlydir").glob("*.incr.aof"))

    def aof_by_kind(self) -> dict[str, int]:
        """AOF bytes by key kind, and ``commits``: how many commits (``HINCRBY state
        applied``, one per commit in every version of the commit script)."""
        out: dict[str, int] = defaultdict(int)
        for f in (self.dir / "appendonlydir").glob("*.incr.aof"):
            for cmd, size in _resp_commands(f.read_bytes()):
                out[_kind(cmd)] += size
                if cmd[0].upper() == b"HINCRBY" and cmd[2:3] == [b"applied"]:
                    out["commits"] += 1
        return dict(out)


def _resp_commands(buf: bytes) -> Iterator[tuple[list[bytes], int]]:
    """The commands of an AOF (RESP arrays) with their sizes in bytes."""
    i = 0
    while i < len(buf):
        start = i
        end = buf.index(b"\r\n", i)
        n = int(buf[i + 1 : end])
        i = end + 2
        args = []
        for _ in range(n):
            end = buf.index(b"\r\n", i)
            size = int(buf[i + 1 : end])
            args.append(buf[end + 2 : end + 2 + size])
            i = end + 2 + size + 2
        yield args, i - start


def _kind(cmd: list[bytes]) -> str:
    if len(cmd) < 2 or cmd[0].upper() in (b"SELECT", b"MULTI", b"EXEC"):
        return "other"
    key = cmd[1].decode(errors="replace")
    part = key.split("}:", 1)[1] if "}:" in key else key
    part = part.split(":", 1)[0]
    if part == "blobs" and cmd[0].upper() == b"HSET" and len(cmd) >= 4 and len(cmd[3]) > 1:
        head = cmd[3][:512]  # the header of a quality tracker state, full or delta
        if b"window_margins" in head or b"qdelta" in head:
            return "blobs (quality)"
        return "blobs (full)" if cmd[3][1] == 0 else "blobs (delta)"
    return {"v": "versions (v:n)", "pred": "kept predictions (pred:*)"}.get(part, part)


async def _request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, method: str, path: str, body: bytes
) -> tuple[int, bytes]:
    writer.write(
        f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    status = int((await reader.readline()).split(b" ", 2)[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    return status, (await reader.readexactly(length) if length else b"")


class Client:
    def __init__(self, port: int) -> None:
        self.port = port

    async def __aenter__(self) -> Client:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.writer.close()

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        raw = b"" if body is None else orjson.dumps(body)
        status, data = await _request(self.reader, self.writer, method, path, raw)
        return status, orjson.loads(data) if data else None


async def wait_up(port: int) -> None:
    for _ in range(300):
        try:
            async with Client(port) as c:
                if (await c.call("GET", "/healthz"))[0] == 200:
                    return
        except OSError:
            pass
        await asyncio.sleep(0.2)
    raise RuntimeError("API did not come up")


async def create_and_warm(port: int, corpus: list[str]) -> None:
    await wait_up(port)
    async with Client(port) as c:
        status, body = await c.call("PUT", f"/models/{MODEL}", {"classes": ["ham", "spam"]})
        assert status in (200, 201), body
        # compile the worker's kernels and the API's featurizer before measuring
        status, body = await c.call(
            "POST", f"/models/{MODEL}/examples?wait=30", {"examples": [example(corpus[0])]}
        )
        assert status in (200, 202), body


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else float("nan")


async def prefill(port: int, corpus: list[str], n: int, per_request: int = 200) -> None:
    """Teach the model ``n`` texts (a mature model: its full state is no longer small) and
    wait until the worker has learned them."""
    async with Client(port) as c:
        sent = 1
        for i in range(0, n, per_request):
            chunk = [
                example(corpus[(7 * j) % len(corpus)]) for j in range(i, min(n, i + per_request))
            ]
            while True:
                status, _ = await c.call("POST", f"/models/{MODEL}/examples", {"examples": chunk})
                if status == 202:
                    break
                await asyncio.sleep(0.2)  # backpressure
            sent += len(chunk)
        for _ in range(3000):
            status, m = await c.call("GET", f"/models/{MODEL}/metrics")
            if m["examples_seen"] >= sent and m["lag"] == 0:
                return
            await asyncio.sleep(0.1)


async def mixed(args: argparse.Namespace) -> None:
    corpus = texts(args.texts, 20_000)
    with Services(args.src) as svc:
        await create_and_warm(svc.api_port, corpus)
        if args.prefill:
            await prefill(svc.api_port, texts(args.prefill_texts, args.prefill), args.prefill)
        await asyncio.sleep(2.0)
        info0, aof0 = svc.r.info("stats"), svc.aof_bytes()
        kinds0 = svc.aof_by_kind()
        lat: dict[str, list[float]] = {"ingest": [], "predict": []}
        ingested = [0]
        bad: dict[int, int] = defaultdict(int)
        counter = iter(range(10**9))
        end = time.perf_counter() + args.seconds

        async def run(kind: str) -> None:
            async with Client(svc.api_port) as c:
                while time.perf_counter() < end:
                    i = next(counter)
                    text = corpus[i % len(corpus)]
                    if kind == "ingest":
                        path, body = f"/models/{MODEL}/examples", orjson.dumps(example(text))
                        ingested[0] += len(body)
                    else:
                        path, body = f"/models/{MODEL}/predict", orjson.dumps(example(text, False))
                    t = time.perf_counter()
                    status, _ = await _request(c.reader, c.writer, "POST", path, body)
                    lat[kind].append(time.perf_counter() - t)
                    if status >= 300:
                        bad[status] += 1

        started = time.perf_counter()
        await asyncio.gather(
            *(run("ingest") for _ in range(args.ingest_conns)),
            *(run("predict") for _ in range(args.predict_conns)),
        )
        took = time.perf_counter() - started
        await asyncio.sleep(1.0)  # let the worker commit what is in hand
        info1, aof1 = svc.r.info("stats"), svc.aof_bytes()
        kinds1 = svc.aof_by_kind()
        net = info1["total_net_input_bytes"] - info0["total_net_input_bytes"]
        print(f"\nmixed load, {took:.1f} s, src {args.src}, prefill {args.prefill:,}")
        print("| | requests/s | p50 ms | p99 ms |\n|---|---|---|---|")
        for kind, xs in lat.items():
            print(f"| {kind} | {len(xs) / took:,.0f} | {pct(xs, 0.5):.1f} | {pct(xs, 0.99):.1f} |")
        print(f"\nnon-2xx: {dict(bad) or 0}")
        print(f"HTTP bytes ingested: {ingested[0]:,} ({ingested[0] / took / 1e6:.2f} MB/s)")
        print(f"Redis net input: {net:,} bytes ({net / took / 1e6:.2f} MB/s), "
              f"{net / max(1, ingested[0]):.2f}× ingested")  # fmt: skip
        print(f"AOF growth: {aof1 - aof0:,} bytes, {(aof1 - aof0) / max(1, ingested[0]):.2f}× "
              "ingested; by key kind:")  # fmt: skip
        commits = kinds1.pop("commits", 0) - kinds0.pop("commits", 0)
        model = sum(
            kinds1[k] - kinds0.get(k, 0) for k in kinds1 if k.startswith(("state", "blobs", "vers"))
        )
        print(f"commits: {commits:,}; state + versions + blobs: {model / max(1, commits):,.0f} "
              f"AOF bytes per commit")  # fmt: skip
        print("| key | AOF bytes | × ingested |\n|---|---|---|")
        for kind in sorted(kinds1, key=lambda k: -(kinds1[k] - kinds0.get(k, 0))):
            d = kinds1[kind] - kinds0.get(kind, 0)
            if d:
                print(f"| {kind} | {d:,} | {d / max(1, ingested[0]):.2f} |")


async def memory(args: argparse.Namespace) -> None:
    corpus = texts(args.texts, args.messages)
    with Services(args.src) as svc:
        await create_and_warm(svc.api_port, corpus)
        async with Client(svc.api_port) as c:
            sent = 1
            for i in range(1, args.messages, args.per_request):
                chunk = [example(t) for t in corpus[i : i + args.per_request]]
                status, body = await c.call(
                    "POST", f"/models/{MODEL}/examples", {"examples": chunk}
                )
                assert status == 202, body
                sent += len(chunk)
                await asyncio.sleep(args.pause)
            for _ in range(600):
                status, m = await c.call("GET", f"/models/{MODEL}/metrics")
                if m["examples_seen"] >= sent and m["lag"] == 0:
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.5)  # the drained publish
            status, versions = await c.call("GET", f"/models/{MODEL}/versions")
        keys = list(svc.r.scan_iter(match=f"{PREFIX}:{{{MODEL}}}:*", count=1000))
        sizes: dict[str, int] = defaultdict(int)
        for key in keys:
            sizes[_kind([b"X", key])] += int(svc.r.memory_usage(key, samples=0) or 0)
        total = sum(sizes.values())
        n_versions = len(versions["versions"]) if isinstance(versions, dict) else len(versions)
        print(f"\nmemory of one spam-preset model after {sent:,} messages "
              f"({args.per_request} per request), src {args.src}")  # fmt: skip
        print(f"examples_seen {m['examples_seen']:,}, retained versions {n_versions}, "
              f"keys {len(keys)}")  # fmt: skip
        blobs = svc.r.hgetall(f"{PREFIX}:{{{MODEL}}}:blobs")
        if blobs:
            full = [len(b) for b in blobs.values() if b[1] == 0]  # format byte 2, flags 0
            delta = [len(b) for b in blobs.values() if b[1] != 0]
            print(f"blobs: {len(full)} full ({sum(full):,} bytes), {len(delta)} deltas "
                  f"({sum(delta):,} bytes)")  # fmt: skip
        print("| key | MEMORY USAGE bytes |\n|---|---|")
        for kind, size in sorted(sizes.items(), key=lambda kv: -kv[1]):
            print(f"| {kind} | {size:,} |")
        print(f"| **total** | **{total:,}** ({total / 2**20:.2f} MiB) |")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("mode", choices=["mixed", "memory", "both"])
    p.add_argument("--src", type=Path, default=ROOT, help="source tree to run (default: here)")
    p.add_argument("--texts", help="JSON lines with a 'text' field (default: synthetic SMS)")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--ingest-conns", type=int, default=8)
    p.add_argument("--predict-conns", type=int, default=8)
    p.add_argument(
        "--prefill",
        type=int,
        default=0,
        help="mixed: teach the model this many texts first (a mature model)",
    )
    p.add_argument("--prefill-texts", help="texts for --prefill (default: synthetic)")
    p.add_argument("--messages", type=int, default=5000)
    p.add_argument("--per-request", type=int, default=25)
    p.add_argument("--pause", type=float, default=0.05, help="seconds between memory requests")
    args = p.parse_args(argv)
    args.src = args.src.resolve()
    runs: Sequence[Callable[[argparse.Namespace], Any]] = {
        "mixed": [mixed], "memory": [memory], "both": [mixed, memory]
    }[args.mode]  # fmt: skip
    for run in runs:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
