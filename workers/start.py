"""Starting a worker: the one way ``python -m workers``, ``streamlearn worker`` and
``streamlearn serve`` (in its worker thread) build and run one.

The first SIGTERM/SIGINT stops reading, commits what is in hand, releases the leases and
exits 0; a second one exits at once (code 128 + signal).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable

from service.settings import Settings
from workers.trainer import Worker


@contextlib.asynccontextmanager
async def start_worker(settings: Settings) -> AsyncIterator[Worker]:
    """A :class:`Worker` on its own store (the worker's connection timeouts); the store is
    closed when the block ends (a failing close does not fail the run)."""
    from service.store import Store

    store = Store.open(settings, worker=True)
    try:
        yield Worker(settings, store)
    finally:
        with contextlib.suppress(Exception):
            await store.close()


def signal_handler(
    worker: Worker, exit_now: Callable[[int], object] = os._exit
) -> Callable[[int], None]:
    """First signal: ``worker.stop()`` (commit in hand, release, exit 0). Second: exit now."""

    def on_signal(signum: int) -> None:
        if worker.stopping:
            exit_now(128 + signum)
            return
        logging.getLogger("streamlearn.worker").info("signal %d: finishing", signum)
        worker.stop()

    return on_signal


async def run_worker(settings: Settings, burst: bool = False) -> int:
    """Run one worker until it stops, SIGTERM/SIGINT handled as above; the exit code."""
    async with start_worker(settings) as worker:
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT)
        on_signal = signal_handler(worker)
        for sig in signals:
            loop.add_signal_handler(sig, on_signal, int(sig))
        try:
            await worker.run(burst=burst)
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
    return 0


def run(settings: Settings, *, burst: bool = False, log_level: str = "INFO") -> int:
    """The worker process: logging to stderr at ``log_level``, then :func:`run_worker`."""
    logging.basicConfig(
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    return asyncio.run(run_worker(settings, burst=burst))
