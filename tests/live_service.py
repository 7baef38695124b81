"""A live streamlearn service for tests: uvicorn on a free loopback port in a thread, plus a
worker in another (the same :class:`service.cli.serve.WorkerThread` that ``streamlearn serve``
uses). Shared by the client, CLI, README and browser tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx

from service.cli.embedded import free_port
from service.cli.serve import WorkerThread
from service.settings import Settings


@dataclass
class Live:
    url: str
    settings: Settings
    worker: WorkerThread | None


@contextmanager
def live_service(
    settings: Settings, *, worker: bool = True, timeout: float = 30.0
) -> Iterator[Live]:
    import uvicorn

    from service.api.app import create_app

    settings = settings.model_copy(update={"host": "127.0.0.1", "port": free_port()})
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings),
            host=settings.host,
            port=settings.port,
            log_level="warning",
            lifespan="on",
        )
    )
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    url = f"http://{settings.host}:{settings.port}"
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test API did not start")
        time.sleep(0.02)
    w = WorkerThread(settings) if worker else None
    if w is not None:
        w.start()
    try:
        yield Live(url, settings, w)
    finally:
        server.should_exit = True
        thread.join(timeout)
        if w is not None:
            assert w.stop(timeout), "worker did not stop"
            assert w.error is None, f"worker failed: {w.error!r}"


def wait_for(predicate, timeout: float = 60.0, every: float = 0.05):  # type: ignore[no-untyped-def]
    """Poll ``predicate()`` until it returns a truthy value; return it (or fail)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(every)


def get_json(url: str) -> object:
    return httpx.get(url, timeout=5).json()
