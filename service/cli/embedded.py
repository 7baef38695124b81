"""The embedded default Redis that ``streamlearn serve`` uses when no Redis is configured.

A fresh machine should need nothing but ``pip install``. So, with ``STREAMLEARN_REDIS_URL``
unset, ``serve`` starts one of:

- a private ``redis-server`` child (when the binary is on ``PATH``): loopback only, a free
  port, its data in ``settings.data_dir`` with the append-only file on — models, versions and
  the unlearned backlog survive a restart of ``serve``;
- else an in-process fakeredis server on a loopback port (``fakeredis.TcpFakeServer`` in a
  thread) — same protocol, but everything lives in memory and is lost on exit.

This module speaks the Redis protocol only as far as a ``PING`` over a raw socket (to know the
child is ready): the rule that only ``service/store`` imports redis stays true.
"""

from __future__ import annotations

import contextlib
import ctypes
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

Kind = Literal["redis-server", "fakeredis"]
HOST = "127.0.0.1"
PR_SET_PDEATHSIG = 1  # from <sys/prctl.h>

DURABILITY = {
    "redis-server": "durable: append-only file (fsync every second) in {data_dir}; "
    "models and versions survive a restart",
    "fakeredis": "in memory only: every model, example and version is lost on exit "
    "(install redis-server or set STREAMLEARN_REDIS_URL to keep them)",
}


@dataclass
class EmbeddedRedis:
    """A running embedded Redis: where it listens, what it is, and how to stop it."""

    url: str
    kind: Kind
    durability: str
    data_dir: Path | None = None
    note: str = ""  # why the preferred kind was not used, if it was not
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _server: Any = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def stop(self, timeout: float = 10.0) -> None:
        """Shut down: SIGTERM lets redis-server flush its append-only file before it exits."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def alive(self) -> bool:
        if self._process is not None:
            return self._process.poll() is None
        return self._server is not None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def free_port(host: str = HOST) -> int:
    """A TCP port free right now (the OS picks it); racy by nature, so callers retry."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def ping(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when a Redis server answers ``PING`` at host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def redis_server_binary() -> str | None:
    return shutil.which("redis-server")


def start_redis_server(
    data_dir: str | Path, *, binary: str | None = None, attempts: int = 3, timeout: float = 10.0
) -> EmbeddedRedis:
    """Start a private ``redis-server`` child with append-only persistence in ``data_dir``."""
    exe = binary or redis_server_binary()
    if exe is None:
        raise FileNotFoundError("redis-server is not on PATH")
    directory = Path(data_dir).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    last_error = ""
    for _ in range(attempts):
        port = free_port()
        args = [
            exe,
            "--bind", HOST,
            "--port", str(port),
            "--dir", str(directory),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--daemonize", "no",
            "--protected-mode", "yes",
            "--logfile", str(directory / "redis.log"),
        ]  # fmt: skip
        # Own session: a Ctrl-C in the terminal reaches serve, not Redis, so the worker can
        # still commit before serve stops Redis itself. Parent-death signal: if serve is
        # killed outright, Redis gets SIGTERM (and flushes its AOF) instead of living on.
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            if ping(HOST, port):
                return EmbeddedRedis(
                    url=f"redis://{HOST}:{port}/0",
                    kind="redis-server",
                    durability=DURABILITY["redis-server"].format(data_dir=directory),
                    data_dir=directory,
                    _process=proc,
                )
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        last_error = _log_tail(directory / "redis.log")
    raise RuntimeError(f"redis-server did not start in {directory}: {last_error}")


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux for SIGTERM when the parent dies (no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _is_error_reply(exc: BaseException) -> bool:
    """A Redis error *reply* (``-NOSCRIPT …``, ``-WRONGTYPE …``), not a broken connection.

    Matched by class name so that this module need not import redis (the layout rule).
    """
    return any(cls.__name__ == "ResponseError" for cls in type(exc).__mro__)


def _fakeredis_server() -> Any:
    """``fakeredis.TcpFakeServer`` whose connections survive error replies.

    fakeredis 2.x closes the TCP connection after *any* exception while reading a reply, so
    a ``NOSCRIPT`` (which redis-py's script objects expect on first use, then load the script
    and retry) drops the connection under the retry. A real Redis keeps the connection open
    after an error reply; this handler does the same and otherwise defers to fakeredis.
    """
    import select

    from fakeredis import TcpFakeServer
    from fakeredis._clients import _tcp_server as tcp

    class Handler(tcp.TCPFakeRequestHandler):
        def handle(self) -> None:
            while not self.server._shutdown_event.is_set():
                try:
                    if self.current_client.can_read():
                        try:
                            response = self.current_client.read_response()
                        except Exception as e:
                            if not _is_error_reply(e):
                                raise
                            response = e
                        self.writer.dump(response)
                        continue
                    data = self.rfile.readline()
                    if data == b"":
                        readable, _, _ = select.select([self.connection], [], [], 0.01)
                        if not readable:
                            continue
                        data = self.rfile.readline()
                        if data == b"":
                            break
                    self.current_client.get_socket().sendall(data)
                except ConnectionError:
                    break
                except Exception as e:
                    self.writer.dump(e)
                    break

    server = TcpFakeServer((HOST, 0), server_type="redis")
    server.RequestHandlerClass = Handler
    return server


def start_fakeredis() -> EmbeddedRedis:
    """Serve an in-memory fakeredis on a loopback port from a daemon thread."""
    server = _fakeredis_server()
    server.daemon_threads = True
    port = int(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, name="fakeredis", daemon=True)
    thread.start()
    return EmbeddedRedis(
        url=f"redis://{HOST}:{port}/0",
        kind="fakeredis",
        durability=DURABILITY["fakeredis"],
        _server=server,
        _thread=thread,
    )


def start_embedded(data_dir: str | Path, *, prefer: Kind | None = None) -> EmbeddedRedis:
    """The best embedded Redis available: a redis-server child, else fakeredis.

    ``prefer="fakeredis"`` skips the binary (tests, or a machine where it misbehaves).
    """
    if prefer not in (None, "redis-server", "fakeredis"):
        raise ValueError(f"prefer must be 'redis-server', 'fakeredis' or None, got {prefer!r}")
    note = "redis-server is not installed"
    if prefer == "fakeredis":
        note = "fakeredis was asked for"
    elif redis_server_binary() is not None:
        try:
            return start_redis_server(data_dir)
        except (RuntimeError, OSError) as e:
            if prefer == "redis-server":
                raise
            note = f"redis-server failed to start ({e})"
    elif prefer == "redis-server":
        raise FileNotFoundError("redis-server is not on PATH")
    embedded = start_fakeredis()
    embedded.note = note
    return embedded


__all__ = [
    "EmbeddedRedis",
    "free_port",
    "ping",
    "start_embedded",
    "start_fakeredis",
    "start_redis_server",
]
