"""CPU work off the event loop when it is big enough to matter.

Small batches are featurized inline (a thread hop costs more than the work); big ones run in
the default thread pool so one 1,000-example request does not stall every other connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from starlette.concurrency import run_in_threadpool

T = TypeVar("T")

INLINE_BYTES = 64 * 1024


async def run_cpu(size: int, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
    """Run ``fn`` inline when ``size`` (bytes of input) is small, else in a worker thread."""
    if size <= INLINE_BYTES:
        return fn(*args, **kwargs)
    return await run_in_threadpool(fn, *args, **kwargs)
