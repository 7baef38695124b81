"""Coalescing concurrent small writes into one Redis round trip.

While one flush is in flight, requests that arrive queue up; when it returns, everything
queued goes out together as the next flush. A lone request is flushed at once (no timer, no
added latency); under load, N concurrent requests cost about one round trip instead of N.
Each caller still gets its own outcome: the flush's exception is raised in every caller of
that group (a group is appended atomically, as one batch, so it fails or lands as a whole).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Coalescer(Generic[T]):
    def __init__(self, flush: Callable[[list[T]], Awaitable[None]], max_group: int = 1000) -> None:
        self.flush = flush
        self.max_group = max_group
        self.pending: list[tuple[T, asyncio.Future[None]]] = []
        self.running = False
        self.groups = 0  # flushes done (tests read it)
        self._task: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.pending.append((item, fut))
        if not self.running:
            self.running = True
            self._task = asyncio.create_task(self._drain())
        await fut

    async def _drain(self) -> None:
        try:
            while self.pending:
                group = self.pending[: self.max_group]
                del self.pending[: self.max_group]
                self.groups += 1
                try:
                    await self.flush([item for item, _ in group])
                except BaseException as exc:  # every caller of the group gets the outcome
                    for _, fut in group:
                        if not fut.done():
                            fut.set_exception(exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                else:
                    for _, fut in group:
                        if not fut.done():
                            fut.set_result(None)
        finally:
            self.running = False
            for _, fut in self.pending:  # only if cancelled mid-way: fail, never hang
                if not fut.done():
                    fut.set_exception(RuntimeError("coalescer stopped"))
            self.pending.clear()
