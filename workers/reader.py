"""Reading ahead: one XREAD in flight while the worker learns what the previous one returned.

Learning is synchronous (compiled) work on the event loop; Redis building and sending the
next reply is work on another core. Issuing the next read *before* learning the current
entries lets the two overlap. The read ahead is issued after the last entry id of the
current reply for each model; its result is used for a model only if the worker's position
for that model is still exactly that id when it arrives — a model dropped, re-taken or reset
in between is simply read again, so read-ahead can never skip or repeat an entry.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

from service.store import Store, StreamEntry

Read = dict[str, list[StreamEntry]]

# Aim for about this many examples per XREAD and model: entries of 1,000 examples with 100
# non-zeros are ~1.2 MB each, and ``read_count`` (200) of them would be a 240 MB reply.
READ_EXAMPLES = 20_000


class ReadAhead:
    """``await next(positions)``: the entries after each position, reading one step ahead."""

    def __init__(self, store: Store, count: int, block_ms: int) -> None:
        self.store, self.max_count, self.block_ms = store, count, block_ms
        self.count = min(count, 16)  # until the entry size is known
        self._task: asyncio.Task[Read] | None = None
        self._issued: dict[str, str] = {}

    async def next(self, positions: Mapping[str, str]) -> Read:
        """Entries after ``positions`` (``{model: last id applied}``), then read ahead."""
        if self._task is None:
            read = await self.store.read(dict(positions), self.count, self.block_ms)
        else:
            task, issued, self._task = self._task, self._issued, None
            got = await task
            read = {m: es for m, es in got.items() if positions.get(m) == issued.get(m)}
            stale = {m: p for m, p in positions.items() if issued.get(m) != p}
            if stale and not read:
                read = await self.store.read(stale, self.count, None)
        self._adapt(read)
        ahead = {m: (read[m][-1].id if read.get(m) else p) for m, p in positions.items()}
        if ahead:
            self._issued = ahead
            self._task = asyncio.create_task(self.store.read(ahead, self.count, self.block_ms))
            await asyncio.sleep(0)  # let it send the command before we start learning
        return read

    def _adapt(self, read: Read) -> None:
        """Entries per read: ``read_count``, fewer when entries are big batches."""
        entries = [e for es in read.values() for e in es]
        if entries:
            per_entry = max(1, sum(e.n or 1 for e in entries) // len(entries))
            self.count = max(1, min(self.max_count, READ_EXAMPLES // per_entry))

    async def close(self) -> None:
        """Wait for a read in flight (bounded by ``block_ms``) and forget it."""
        task, self._task = self._task, None
        if task is not None:
            with contextlib.suppress(Exception):
                await task
