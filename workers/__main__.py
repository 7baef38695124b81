"""``python -m workers [--burst] [--redis-url URL] …`` — run one worker process.

Settings come from the environment (``STREAMLEARN_*``) with the flags on top. The first
SIGTERM/SIGINT stops reading, commits what is in hand, releases the leases and exits 0; a
second one exits at once (code 128 + signal).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from service.settings import Settings
from workers.start import run


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m workers", description=__doc__.splitlines()[0])
    p.add_argument("--burst", action="store_true", help="return when every model is caught up")
    p.add_argument("--redis-url", help="redis://, rediss://, unix:// or memory:// URL")
    p.add_argument("--cluster", action="store_true", default=None, help="Redis Cluster")
    p.add_argument("--key-prefix", help="prefix of every key")
    p.add_argument("--worker-id", help="this worker's id (default: host-pid-random)")
    p.add_argument("--log-level", default=os.environ.get("STREAMLEARN_LOG_LEVEL", "INFO"))
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = Settings.from_flags(
        redis_url=args.redis_url,
        redis_cluster=args.cluster,
        key_prefix=args.key_prefix,
        worker_id=args.worker_id,
    )
    return run(settings, burst=args.burst, log_level=args.log_level)


if __name__ == "__main__":
    sys.exit(main())
