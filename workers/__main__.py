"""``python -m workers [--burst] [--redis-url URL] …`` — run one worker process.

Settings come from the environment (``STREAMLEARN_*``) with the flags on top. The first
SIGTERM/SIGINT stops reading, commits what is in hand, releases the leases and exits 0; a
second one exits at once (code 128 + signal).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence

from service.settings import Settings
from workers.trainer import Worker


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m workers", description=__doc__.splitlines()[0])
    p.add_argument("--burst", action="store_true", help="return when every model is caught up")
    p.add_argument("--redis-url", help="redis://, rediss://, unix:// or memory:// URL")
    p.add_argument("--cluster", action="store_true", default=None, help="Redis Cluster")
    p.add_argument("--key-prefix", help="prefix of every key")
    p.add_argument("--worker-id", help="this worker's id (default: host-pid-random)")
    p.add_argument("--log-level", default=os.environ.get("STREAMLEARN_LOG_LEVEL", "INFO"))
    return p.parse_args(argv)


def settings_from(args: argparse.Namespace) -> Settings:
    overrides = {
        "redis_url": args.redis_url,
        "redis_cluster": args.cluster,
        "key_prefix": args.key_prefix,
        "worker_id": args.worker_id,
    }
    return Settings(**{k: v for k, v in overrides.items() if v is not None})


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


async def run_worker(settings: Settings, burst: bool = False, handle_signals: bool = True) -> int:
    """Run one worker until it stops; the process exit code."""
    from service.store import Store

    store = Store.open(settings, worker=True)
    worker = Worker(settings, store)
    loop = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT)

    on_signal = signal_handler(worker)

    if handle_signals:
        for sig in signals:
            loop.add_signal_handler(sig, on_signal, int(sig))
    try:
        await worker.run(burst=burst)
    finally:
        if handle_signals:
            for sig in signals:
                loop.remove_signal_handler(sig)
        await store.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    return asyncio.run(run_worker(settings_from(args), burst=args.burst))


if __name__ == "__main__":
    sys.exit(main())
