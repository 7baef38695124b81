"""Private ``redis-server`` processes for the restart and cluster tests.

The shared server at 127.0.0.1:6379 must never be restarted or reconfigured by a test, so the
tests that need to kill Redis, or need a Redis Cluster, start their own servers here: each on a
free loopback port, each in its own temporary directory, with the append-only file fsynced on
every write (``--appendonly yes --appendfsync always``) so that an acknowledged write survives a
SIGKILL of the server. Everything is torn down (processes killed, directories removed) when the
context manager exits, whatever happened inside.

>>> port = free_port()
>>> 1024 < port < 65536
True
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

REDIS_SERVER = shutil.which("redis-server") or "redis-server"
REDIS_CLI = shutil.which("redis-cli") or "redis-cli"
HOST = "127.0.0.1"


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port(*, with_bus: bool = False) -> int:
    """A loopback port that is free now; with ``with_bus`` also ``port + 10000`` (cluster bus).

    Ports are drawn at random from a range the kernel does not hand out as ephemeral ports on
    Linux (32768–60999), so two tests asking at once rarely pick the same one; the server start
    retries on a clash anyway.
    """
    for _ in range(1000):
        port = random.randint(20_000, 22_767) if with_bus else random.randint(10_000, 32_000)
        if _port_is_free(port) and (not with_bus or _port_is_free(port + 10_000)):
            return port
    raise RuntimeError("no free loopback port found")


def _ping(port: int, timeout: float = 0.5) -> bool:
    """True if a Redis answers PING on ``port`` (raw RESP, no client library needed)."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class _Managed:
    """``with`` support for a started process group: start on enter (cleaning up if that
    fails half-way), clean up on exit."""

    def start(self) -> Self:
        raise NotImplementedError

    def cleanup(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()


@dataclass
class RedisServer(_Managed):
    """One private ``redis-server`` on a loopback port, restartable on the same port and data.

    ``stop(signal.SIGKILL)`` then ``start()`` is a crash and recovery: the server reloads its
    append-only file from ``dir``.
    """

    port: int = 0
    cluster: bool = False
    extra_args: Sequence[str] = ()
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="sl-redis-")))
    proc: subprocess.Popen[bytes] | None = None
    _own_dir: bool = True
    _started: bool = False

    def __post_init__(self) -> None:
        if not self.port:
            self.port = free_port(with_bus=self.cluster)

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.dir / "redis.log"

    def args(self) -> list[str]:
        args = [
            REDIS_SERVER,
            "--port", str(self.port),
            "--bind", HOST,
            "--dir", str(self.dir),
            "--logfile", str(self.log_path),
            "--daemonize", "no",
            "--protected-mode", "no",
            "--save", "",
            "--appendonly", "yes",
            "--appendfsync", "always",
        ]  # fmt: skip
        if self.cluster:
            args += [
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(self.dir / "nodes.conf"),
                "--cluster-node-timeout", "2000",
            ]  # fmt: skip
        return args + list(self.extra_args)

    def start(self, timeout: float = 10.0) -> RedisServer:
        """Start (or restart) the server and wait until it answers PING (AOF loaded).

        A first start that fails (another test grabbed the port in between) retries on a new
        port; a restart keeps its port, since clients hold the URL.
        """
        if self.running:
            return self
        if self._started:
            return self._start(timeout)
        for attempt in range(3):
            try:
                self._start(timeout)
                self._started = True
                return self
            except RuntimeError:
                if attempt == 2:
                    raise
                self.port = free_port(with_bus=self.cluster)
        raise AssertionError("unreachable")

    def _start(self, timeout: float) -> RedisServer:
        self.proc = subprocess.Popen(
            self.args(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"redis-server on port {self.port} exited with {self.proc.returncode}: "
                    f"{self.log_tail()}"
                )
            if _ping(self.port):
                return self
            time.sleep(0.02)
        self.stop(signal.SIGKILL)
        raise RuntimeError(f"redis-server on port {self.port} did not answer: {self.log_tail()}")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        """Send ``sig`` and wait for the process to go (SIGKILL if it will not)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def kill(self) -> None:
        """A crash: SIGKILL, no shutdown work at all."""
        self.stop(signal.SIGKILL)

    def restart(self, sig: int = signal.SIGTERM, down_s: float = 0.0) -> None:
        """Stop with ``sig``, stay down ``down_s`` seconds, start again on the same port."""
        self.stop(sig)
        if down_s:
            time.sleep(down_s)
        self.start()

    def cli(self, *args: str, timeout: float = 10.0) -> str:
        """Run ``redis-cli`` against this server and return its stdout."""
        out = subprocess.run(
            [REDIS_CLI, "-h", HOST, "-p", str(self.port), *args],
            capture_output=True,
            timeout=timeout,
            check=True,
        )
        return out.stdout.decode()

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def cleanup(self) -> None:
        self.stop(signal.SIGKILL)
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class RedisCluster(_Managed):
    """A local Redis Cluster of ``masters`` masters and no replicas, slots spread evenly."""

    masters: int = 3
    node_args: Sequence[str] = ()  # extra redis-server arguments for every node
    nodes: list[RedisServer] = field(default_factory=list)

    @property
    def url(self) -> str:
        """A seed node's URL (cluster clients discover the others from it)."""
        return self.nodes[0].url

    def start(self, timeout: float = 30.0) -> RedisCluster:
        for _ in range(self.masters):
            self.nodes.append(RedisServer(cluster=True, extra_args=self.node_args).start())
        create = [REDIS_CLI, "--cluster", "create", *(n.address for n in self.nodes)]
        subprocess.run(
            [*create, "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True,
            timeout=timeout,
            check=True,
        )
        self.wait_ok(timeout)
        return self

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Wait until every node reports ``cluster_state:ok`` and knows every other node."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self._node_ok(n) for n in self.nodes):
                return
            time.sleep(0.1)
        raise RuntimeError("cluster did not reach cluster_state:ok: " + self.nodes[0].log_tail())

    def _node_ok(self, node: RedisServer) -> bool:
        try:
            info = node.cli("cluster", "info")
        except (subprocess.SubprocessError, OSError):
            return False
        fields = dict(line.split(":", 1) for line in info.split() if ":" in line and line.strip())
        return (
            fields.get("cluster_state") == "ok"
            and fields.get("cluster_known_nodes") == str(self.masters)
            and fields.get("cluster_slots_assigned") == "16384"
        )

    def node_for_slot(self, slot: int) -> RedisServer:
        """The node that owns ``slot``, from ``CLUSTER SHARDS``-independent ``CLUSTER NODES``."""
        for line in self.nodes[0].cli("cluster", "nodes").splitlines():
            parts = line.split()
            address = parts[1].split("@")[0]
            for rng in parts[8:]:
                if rng.startswith("["):
                    continue
                lo, _, hi = rng.partition("-")
                if int(lo) <= slot <= int(hi or lo):
                    return next(n for n in self.nodes if n.address == address)
        raise LookupError(f"no node owns slot {slot}")

    def cleanup(self) -> None:
        for node in self.nodes:
            node.cleanup()
        self.nodes.clear()


@contextlib.contextmanager
def redis_server(**kwargs: object) -> Iterator[RedisServer]:
    """``with redis_server() as server:`` — a private AOF-always server, cleaned up after."""
    with RedisServer(**kwargs) as server:  # type: ignore[arg-type]
        yield server


@contextlib.contextmanager
def redis_cluster(masters: int = 3) -> Iterator[RedisCluster]:
    """``with redis_cluster() as cluster:`` — a private local cluster, cleaned up after."""
    with RedisCluster(masters=masters) as cluster:
        yield cluster
