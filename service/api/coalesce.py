"""Coalescing concurrent small requests into one piece of work.

While one flush is in flight, requests that arrive queue up; when it returns, everything
queued goes out together as the next flush. A lone request is flushed at once (no timer, no
added latency); under load, N concurrent requests share one featurizer call, one compiled
scoring call and one Redis round trip instead of N of each.

``flush(items)`` returns one outcome per item — a result, or an exception for that item
alone; if ``flush`` itself raises, every item of the group gets that exception.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Coalescer(Generic[T, R]):
    def __init__(
        self,
        flush: Callable[[list[T]], Awaitable[Sequence[R | BaseException]]],
        max_group: int = 256,
    ) -> None:
        self.flush = flush
        self.max_group = max_group
        self.pending: list[tuple[T, asyncio.Future[R]]] = []
        self.running = False
        self.groups = 0  # flushes done (tests read it)
        self._task: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        fut: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self.pending.append((item, fut))
        if not self.running:
            self.running = True
            self._task = asyncio.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        try:
            while self.pending:
                group = self.pending[: self.max_group]
                del self.pending[: self.max_group]
                self.groups += 1
                try:
                    outcomes = await self.flush([item for item, _ in group])
                except BaseException as exc:  # every caller of the group gets the outcome
                    for _, fut in group:
                        if not fut.done():
                            fut.set_exception(exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                for (_, fut), outcome in zip(group, outcomes, strict=True):
                    if fut.done():
                        continue
                    if isinstance(outcome, BaseException):
                        fut.set_exception(outcome)
                    else:
                        fut.set_result(outcome)
        finally:
            self.running = False
            for _, fut in self.pending:  # only if cancelled mid-way: fail, never hang
                if not fut.done():
                    fut.set_exception(RuntimeError("coalescer stopped"))
            self.pending.clear()
