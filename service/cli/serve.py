"""``streamlearn serve``: the API and one worker in one process, on an embedded Redis by default.

The API runs under uvicorn in the main thread (uvicorn owns SIGINT/SIGTERM); the worker runs
in a second thread with its own event loop — numba kernels release the GIL, so the two share
the process without starving each other. On Ctrl-C: uvicorn drains its requests, then the
worker is asked to stop (it finishes and commits the batch in hand and releases its lease),
then the embedded Redis, if any, is shut down (redis-server flushes its append-only file).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from service.cli.datadir import DataDirBusy, DataDirLock
from service.cli.embedded import EmbeddedRedis, Kind, free_port, start_embedded
from service.settings import Settings

if TYPE_CHECKING:
    from workers.trainer import Worker

Say = Callable[[str], None]


@dataclass
class WorkerThread:
    """A worker running in its own thread and event loop, stoppable from any thread."""

    settings: Settings
    on_error: Callable[[BaseException], None] | None = None  # told at once, from the thread
    stop_event: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="streamlearn-worker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> bool:
        """Ask the worker to commit and exit; True when it did within ``timeout``."""
        self.stop_event.set()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as e:  # a thread cannot raise to its caller: keep and tell
            self.error = e
            if self.on_error is not None:
                self.on_error(e)

    async def _run(self) -> None:
        from workers.start import start_worker

        async with start_worker(self.settings) as worker:
            task = asyncio.create_task(worker.run(burst=False))
            while not self.stop_event.is_set() and not task.done():
                await asyncio.sleep(0.05)
            if not task.done():
                await _request_stop(worker, task)
            await task


async def _request_stop(worker: Worker, task: asyncio.Task[Any], timeout: float = 20.0) -> None:
    """``Worker.stop()`` (what SIGTERM calls: commit what it holds, release the leases);
    cancel only if the worker does not finish within ``timeout``."""
    worker.stop()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(task), timeout)
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def port_free(host: str, port: int) -> bool:
    """Whether the API could bind ``host:port`` now (checked before anything starts)."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError:
        return False
    return True


def urls(settings: Settings) -> dict[str, str]:
    host = settings.host
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    base = f"http://{shown}:{settings.port}"
    return {"api": base, "docs": f"{base}/docs", "dashboard": f"{base}/"}


def describe_embedded(embedded: EmbeddedRedis) -> str:
    what = (
        f"a private redis-server at {embedded.url}"
        if embedded.kind == "redis-server"
        else f"an in-process fakeredis at {embedded.url}"
    )
    note = f" ({embedded.note})" if embedded.note else ""
    return f"Redis: embedded, {what}{note} — {embedded.durability}"


def warm_up() -> None:
    """Compile (or load from numba's on-disk cache) the kernels of the default spam model.

    Done before the API listens, so that the first request of the README's example does not
    wait seconds for a compile — and does not stall the event loop while it does.
    """
    from service.learning.spec import ModelSpec

    spec = ModelSpec.from_dict({"preset": "spam", "classes": ["ham", "spam"], "bits": 8})
    batch = spec.featurizer().transform(
        [{"text": "warm up", "label": "spam"}, {"features": {"x": 1.0}, "label": "ham"}]
    )
    learner = spec.build_learner()
    learner.learn(batch)
    learner.serving().proba(batch)


def _print(message: str) -> None:
    print(message, flush=True)  # flushed: the banner must show even when stdout is a pipe


def serve(
    settings: Settings,
    *,
    embedded: Kind | None = None,
    say: Say = _print,
    log_level: str = "warning",
) -> int:
    """Run API + worker until interrupted; returns a process exit code.

    With the embedded Redis, the data directory is held exclusively for the whole run
    (:class:`service.cli.datadir.DataDirLock`): a second serve on it refuses to start.
    """
    lock: DataDirLock | None = None
    if settings.redis_url is None:  # the embedded Redis keeps its files in the data dir
        lock = DataDirLock(settings.data_dir)
        try:
            lock.acquire()
        except DataDirBusy as e:
            say(str(e))
            return 2
    try:
        return _serve(settings, embedded=embedded, say=say, log_level=log_level)
    finally:
        if lock is not None:
            lock.release()


def _serve(settings: Settings, *, embedded: Kind | None, say: Say, log_level: str) -> int:
    import uvicorn

    from service.api.app import create_app

    if settings.port == 0:
        settings = settings.model_copy(update={"port": free_port(settings.host)})
    elif not port_free(settings.host, settings.port):
        say(
            f"Port {settings.port} on {settings.host} is in use (another streamlearn serve?): "
            "pass --port N, or --port 0 for any free one."
        )
        return 2
    redis: EmbeddedRedis | None = None
    if settings.redis_url is None:
        try:
            redis = start_embedded(settings.data_dir, prefer=embedded)
        except (RuntimeError, OSError) as e:  # only when redis-server was asked for by name
            say(f"Cannot start the embedded Redis: {e}")
            return 2
        settings = settings.model_copy(update={"redis_url": redis.url})
        say(describe_embedded(redis))
    else:
        say(f"Redis: {_redact(settings.redis_url)} (STREAMLEARN_REDIS_URL)")
    worker = WorkerThread(
        settings,
        on_error=lambda e: say(f"worker failed: {e!r} — the API still answers, nothing is learned"),
    )
    code = 0
    try:
        app = create_app(settings)
        say("Loading the learning kernels (compiled on the first run only, then cached)…")
        try:
            warm_up()
        except Exception as e:  # a cold first request is slower, nothing worse
            say(f"(warm-up skipped: {e!r})")
        worker.start()
        u = urls(settings)
        say(f"API:       {u['api']}")
        say(f"Docs:      {u['docs']}")
        say(f"Dashboard: {u['dashboard']}")
        say("Press Ctrl-C to stop.")
        from service.api.server import uvicorn_options  # our JSON answer to malformed HTTP

        config = uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            log_level=log_level,
            lifespan="on",
            **uvicorn_options(),
        )
        server = uvicorn.Server(config)
        with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises Ctrl-C once it is done
            server.run()
        if not server.started:
            code = 1
    finally:
        code = _stop(worker, redis, say) or code
    return code


def _stop(worker: WorkerThread, redis: EmbeddedRedis | None, say: Say) -> int:
    """Stop the worker (it commits), then the embedded Redis — the latter even if a second
    Ctrl-C cuts the wait for the worker short (the uncommitted batch is replayed next time)."""
    code = 0
    try:
        say("Stopping: worker commits its batch…")
        if not worker.stop():
            say("worker did not stop in time")
            code = 1
        if worker.error is not None:
            say(f"worker failed: {worker.error!r}")
            code = 1
    except KeyboardInterrupt:
        say("interrupted: not waiting for the worker")
        code = 130
    finally:
        if redis is not None:
            redis.stop()
            say(f"Embedded Redis stopped ({redis.kind}).")
    return code


def _redact(url: str) -> str:
    """The URL without its password, for printing.

    >>> _redact("redis://app:s3cret@redis.internal:6379/0")
    'redis://app:***@redis.internal:6379/0'
    """
    if "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    cred, _, host = rest.rpartition("@")
    user = cred.split(":", 1)[0]
    return f"{scheme}://{user + ':***' if user else '***'}@{host}"


__all__ = ["WorkerThread", "describe_embedded", "serve", "urls"]
