"""``streamlearn serve`` and its embedded Redis: what a fresh machine gets.

The embedded tests talk to the started servers with redis-py (tests may import redis). The
end-to-end tests run ``serve`` as a real subprocess — no STREAMLEARN_REDIS_URL, a temporary
data directory — post examples over HTTP, stop it with SIGINT as Ctrl-C would, and check
that it stopped cleanly, took its Redis down, and (with redis-server) kept the data.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import redis

from service.cli import embedded
from service.cli.embedded import (
    free_port,
    ping,
    start_embedded,
    start_fakeredis,
    start_redis_server,
)
from service.cli.serve import _redact, urls
from service.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
needs_redis_server = pytest.mark.skipif(
    embedded.redis_server_binary() is None, reason="redis-server is not installed"
)


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


@needs_redis_server
def test_redis_server_child_keeps_data_across_restarts(tmp_path: Path) -> None:
    first = start_redis_server(tmp_path)
    try:
        assert first.kind == "redis-server" and str(tmp_path) in first.durability
        client = redis.Redis.from_url(first.url)
        client.xadd("sl:{m}:examples", {"b": b"x"})
        client.close()
    finally:
        first.stop()
    assert not ping("127.0.0.1", port_of(first.url)), "the child must be gone after stop()"
    assert (tmp_path / "appendonlydir").is_dir()

    with start_redis_server(tmp_path) as second:
        client = redis.Redis.from_url(second.url)
        assert client.xlen("sl:{m}:examples") == 1
        client.close()


@needs_redis_server
def test_redis_server_child_dies_with_its_parent(tmp_path: Path) -> None:
    """If serve is killed outright (SIGKILL), its private Redis must not live on."""
    code = (
        "import sys, time\n"
        "from service.cli.embedded import start_redis_server\n"
        "e = start_redis_server(sys.argv[1])\n"
        "print(e.url, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        url = (parent.stdout.readline() if parent.stdout else "").strip()
        port = port_of(url)
        assert ping("127.0.0.1", port)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 15
    while ping("127.0.0.1", port):
        assert time.monotonic() < deadline, "redis-server outlived its killed parent"
        time.sleep(0.1)


def test_fakeredis_server_speaks_redis_and_stops() -> None:
    with start_fakeredis() as fake:
        assert fake.kind == "fakeredis" and "lost on exit" in fake.durability
        client = redis.Redis.from_url(fake.url)
        client.xadd("s", {"a": 1})
        assert client.xread({"s": "0"}, block=10)[0][1][0][1] == {b"a": b"1"}
        assert client.eval("return redis.call('incr', KEYS[1])", 1, "k") == 1  # Lua (lupa)
        # An error reply must not close the connection: redis-py's scripts rely on NOSCRIPT.
        script = client.register_script("return redis.call('set', KEYS[1], ARGV[1])")
        assert script(keys=["s2"], args=["v"]) == b"OK"
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            client.lpush("s2", 1)
        assert client.get("s2") == b"v"
        client.close()
        port = port_of(fake.url)
    assert not ping("127.0.0.1", port)


def test_embedded_falls_back_to_fakeredis_without_the_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedded, "redis_server_binary", lambda: None)
    with start_embedded(tmp_path) as e:
        assert e.kind == "fakeredis"
        assert e.note == "redis-server is not installed"
    with pytest.raises(FileNotFoundError):
        start_embedded(tmp_path, prefer="redis-server")
    from service.cli.serve import serve

    said: list[str] = []
    settings = Settings(port=0, data_dir=str(tmp_path), redis_url=None)
    assert serve(settings, embedded="redis-server", say=said.append) == 2
    assert said == ["Cannot start the embedded Redis: redis-server is not on PATH"]
    with pytest.raises(ValueError, match="prefer must be"):
        start_embedded(tmp_path, prefer="sqlite")  # type: ignore[arg-type]


def test_serve_refuses_a_busy_port_before_starting_anything(tmp_path: Path) -> None:
    import socket

    from service.cli.serve import serve

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        said: list[str] = []
        code = serve(Settings(port=port, data_dir=str(tmp_path)), say=said.append)
    assert code == 2
    assert f"Port {port} on 127.0.0.1 is in use" in said[0]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left in ([], ["serve.lock"]), f"no embedded Redis may have started: {left}"


def test_a_failing_worker_thread_is_reported_at_once() -> None:
    from service.cli.serve import WorkerThread
    from service.errors import StoreUnavailable

    told: list[BaseException] = []
    worker = WorkerThread(Settings(redis_url="bogus://nowhere"), on_error=told.append)
    worker.start()
    assert worker.stop(30)
    assert len(told) == 1 and isinstance(told[0], StoreUnavailable)
    assert worker.error is told[0]


def test_urls_and_redaction() -> None:
    u = urls(Settings(host="0.0.0.0", port=8123))
    assert u == {
        "api": "http://127.0.0.1:8123",
        "docs": "http://127.0.0.1:8123/docs",
        "dashboard": "http://127.0.0.1:8123/",
    }
    assert _redact("redis://user:pw@h:6379/0") == "redis://user:***@h:6379/0"
    assert _redact("rediss://:pw@h:6380") == "rediss://***@h:6380"
    assert _redact("redis://h:6379") == "redis://h:6379"


# --- the real command ------------------------------------------------------------------------


@contextmanager
def serve_process(
    data_dir: Path, *extra: str, env_extra: dict[str, str] | None = None
) -> Iterator[tuple[str, list[str], subprocess.Popen[str]]]:
    """Run ``streamlearn serve`` until its banner is out; yield (url, output lines, process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLEARN_")}
    env.update(env_extra or {})
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "--port", str(port),
         "--data-dir", str(data_dir), *extra],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # its own process group, as a shell gives a foreground job
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "serve exited early:\n" + "".join(lines)
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "serve did not come up:\n" + "".join(lines)
            time.sleep(0.1)
        yield url, lines, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        reader.join(5)


def learn_and_wait(url: str, model: str, n: int) -> dict[str, object]:
    with httpx.Client(base_url=url, timeout=90) as c:
        r = c.put(f"/models/{model}", json={"algorithm": "perceptron", "bits": 10})
        assert r.status_code in (200, 201), r.text
        examples = [
            {"features": {"a": 1.0, "b": i % 3}, "label": 1 if i % 2 else -1} for i in range(n)
        ]
        assert c.post(f"/models/{model}/examples", json={"examples": examples}).status_code == 202
        deadline = time.monotonic() + 90
        while True:
            r = c.get(f"/models/{model}/metrics")
            assert r.status_code == 200, r.text
            if (m := r.json())["examples_seen"] >= n:
                return m  # type: ignore[no-any-return]
            assert time.monotonic() < deadline, m
            time.sleep(0.1)


@needs_redis_server
def test_serve_on_embedded_redis_server_is_durable_and_stops_cleanly(tmp_path: Path) -> None:
    with serve_process(tmp_path) as (url, lines, proc):
        banner = "".join(lines)
        assert "private redis-server" in banner and "durable" in banner
        assert f"Dashboard: {url}/" in banner and f"Docs:      {url}/docs" in banner
        redis_port = int(re.search(r"redis://127\.0\.0\.1:(\d+)", banner).group(1))  # type: ignore[union-attr]
        metrics = learn_and_wait(url, "m", 50)
        assert metrics["examples_seen"] == 50
        assert "<title>streamlearn</title>" in httpx.get(url + "/").text
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: the whole foreground group
        assert proc.wait(30) == 0, "".join(lines)
    assert "worker failed" not in "".join(lines) and "did not stop" not in "".join(lines)
    log = (tmp_path / "redis.log").read_text()
    assert "Received SIGTERM" in log and "Received SIGINT" not in log, (
        "serve must stop Redis itself"
    )
    assert not ping("127.0.0.1", redis_port), "the embedded redis-server outlived serve"
    assert "Embedded Redis stopped" in "".join(lines)

    with serve_process(tmp_path) as (url, _lines, _proc):  # same data dir: the model is back
        after = httpx.get(f"{url}/models/m/metrics").json()
        assert after["examples_seen"] == 50


def test_serve_on_fakeredis_says_data_is_lost_on_exit(tmp_path: Path) -> None:
    with serve_process(tmp_path, "--embedded", "fakeredis") as (url, lines, proc):
        banner = "".join(lines)
        assert "fakeredis" in banner and "lost on exit" in banner
        assert learn_and_wait(url, "f", 10)["examples_seen"] == 10
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0, "".join(lines)


def test_serve_uses_the_configured_redis(tmp_path: Path, settings: Settings) -> None:
    env = {
        "STREAMLEARN_REDIS_URL": str(settings.redis_url),
        "STREAMLEARN_KEY_PREFIX": settings.key_prefix,
    }
    with serve_process(tmp_path, env_extra=env) as (url, lines, proc):
        assert f"Redis: {settings.redis_url} (STREAMLEARN_REDIS_URL)" in "".join(lines)
        assert learn_and_wait(url, "r", 5)["examples_seen"] == 5
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0, "".join(lines)
    assert not (tmp_path / "appendonlydir").exists(), "no embedded Redis may start"
    client = redis.Redis.from_url(str(settings.redis_url))
    try:
        assert client.sismember(f"{settings.key_prefix}:models", "r")
    finally:
        client.close()


# --- one serve per data directory --------------------------------------------------------------

HOLD = (
    "import sys, time\n"
    "from service.cli.datadir import DataDirLock\n"
    "DataDirLock(sys.argv[1]).acquire()\n"
    "print('held', flush=True)\n"
    "time.sleep(120)\n"
)


def test_a_held_data_dir_refuses_a_second_serve_naming_the_holder(tmp_path: Path) -> None:
    from service.cli.datadir import DataDirBusy, DataDirLock
    from service.cli.serve import serve

    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(DataDirBusy) as busy:
            DataDirLock(tmp_path).acquire()
        assert busy.value.pid == holder.pid
        said: list[str] = []
        assert serve(Settings(port=0, data_dir=str(tmp_path)), say=said.append) == 2
        assert len(said) == 1 and f"process {holder.pid}" in said[0], said
        assert str(tmp_path.resolve()) in said[0] and "--data-dir" in said[0]
        assert not (tmp_path / "appendonlydir").exists(), "no second Redis may start"
    finally:
        holder.kill()  # SIGKILL: the kernel drops its flock; the pid stays in the file
        holder.wait()
    with DataDirLock(tmp_path) as lock:  # a stale lock file does not block
        assert lock.holder() == os.getpid()
    with DataDirLock(tmp_path):
        pass  # released on exit: taken again at once


def test_two_serves_on_one_data_dir(tmp_path: Path) -> None:
    with serve_process(tmp_path, "--embedded", "fakeredis") as (url, _lines, proc):
        port = free_port()
        second = subprocess.run(
            [sys.executable, "-m", "service.cli", "serve", "--port", str(port),
             "--data-dir", str(tmp_path), "--embedded", "fakeredis"],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
            env={k: v for k, v in os.environ.items() if not k.startswith("STREAMLEARN_")},
        )  # fmt: skip
        assert second.returncode == 2, second.stdout + second.stderr
        said = " ".join((second.stdout + second.stderr).split())
        assert f"in use by another streamlearn serve (process {proc.pid})" in said, said
        assert httpx.get(url + "/healthz").status_code == 200, "the first one is untouched"
